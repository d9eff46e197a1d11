//! A batch's variable-length columns in one pass over its records: every requested column's Arrow buffers are
//! filled record by record, so each record's bytes are read once while they are in the cache.
//!
//! [`decode_records`] parses and checks each record ([`crate::header::parse_record`] and the CRC checks) and
//! decodes it in the same step, so a record's header and fields are read once; [`decode`] takes records already
//! parsed: the header
//! columns of [`crate::header::parse_records`] for records that passed its checks (the places and lengths of
//! their fields), as the rows of a `DECODE_INPUTS × n` i64 matrix. Each output column is Arrow's binary/string
//! layout (see [`crate::columns`]) in buffers the caller allocated:
//!
//! | column             | buffers                                                     | data bytes at most     |
//! |--------------------|-------------------------------------------------------------|------------------------|
//! | topic              | offsets (n + 1), data                                       | 3 × the topics' bytes  |
//! | body               | offsets (n + 1), data                                       | the bodies' bytes      |
//! | properties string  | offsets (n + 1), data                                       | 3 × the properties'    |
//! | properties map     | map offsets (n + 1), name offsets (p + 1), names, value offsets (p + 1), values | 3 × the properties' each |
//! | tags, uniqKey      | offsets (n + 1), data, validity (n.div_ceil(8))             | 3 × the properties'    |
//! | keys               | list offsets (n + 1), token offsets (p + 1), data           | 3 × the properties'    |
//! | msgId              | offsets (n + 1), data                                       | n × [`crate::columns::MAX_MSG_ID_TEXT`] |
//! | bornHost, storeHost| offsets (n + 1), data                                       | n × [`crate::columns::MAX_HOST_TEXT`]  |
//!
//! `p` is [`crate::columns::max_property_pairs`] of the properties' bytes (for keys [`max_key_tokens`]). Text columns are UTF-8 as Java's
//! `new String(bytes, UTF_8)` makes it: each maximal ill-formed subsequence becomes U+FFFD (3 bytes), hence the
//! 3 × bounds. The properties map, tags, uniqKey and keys follow `MessageDecoder.string2messageProperties`.

use crate::columns::{
    host_at, host_text, kept_pairs, msg_id_text, offset_hex_text, span, GatherError, ShortText,
    MAX_MSG_ID_TEXT,
};
use crate::header;
use crate::layout::{
    load_between, load_lines, load_records, load_tails, BORNHOST_V6_FLAG, IPV6_HOST_LENGTH,
    READ_AHEAD, STOREHOSTADDRESS_V6_FLAG,
};
use crate::queue_test::QueueTest;

/// The input rows, in the order of [`DECODE_INPUTS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Input {
    Sysflag,
    PhyOffset,
    BornHostPos,
    StoreHostPos,
    BodyPos,
    BodyLen,
    TopicPos,
    TopicLen,
    PropsPos,
    PropsLen,
}

/// The header columns (names of [`crate::header::COLUMN_NAMES`]) the decode reads, in [`Input`] order.
pub const DECODE_INPUTS: [&str; 10] = [
    "sysflag",
    "phy_offset",
    "born_host_pos",
    "store_host_pos",
    "body_pos",
    "body_len",
    "topic_pos",
    "topic_len",
    "props_pos",
    "props_len",
];

/// `MessageConst.PROPERTY_TAGS`
pub const PROPERTY_TAGS: &[u8] = b"TAGS";
/// `MessageConst.PROPERTY_KEYS`
pub const PROPERTY_KEYS: &[u8] = b"KEYS";
/// `MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX`
pub const PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: &[u8] = b"UNIQ_KEY";
/// `MessageConst.KEY_SEPARATOR`
pub const KEY_SEPARATOR: u8 = b' ';

/// U+FFFD REPLACEMENT CHARACTER in UTF-8.
const REPLACEMENT: &[u8] = "\u{FFFD}".as_bytes();

/// An Arrow binary or string column being filled row by row into caller-allocated buffers.
pub struct BinaryOut<'a> {
    offsets: &'a mut [i32],
    data: &'a mut [u8],
    validity: Option<&'a mut [u8]>,
    rows: usize,
    used: usize,
    nulls: usize,
}

impl<'a> BinaryOut<'a> {
    /// A column over `offsets` (one more than its rows), `data` and, for a nullable one, `validity`.
    pub fn new(
        offsets: &'a mut [i32],
        data: &'a mut [u8],
        mut validity: Option<&'a mut [u8]>,
    ) -> Self {
        if let Some(first) = offsets.first_mut() {
            *first = 0;
        }
        if let Some(v) = validity.as_deref_mut() {
            v.fill(0);
        }
        Self {
            offsets,
            data,
            validity,
            rows: 0,
            used: 0,
            nulls: 0,
        }
    }

    /// Loads the cache lines of the next `bytes` of room (up to its end), so that the values written next land
    /// in lines already in the cache instead of each store waiting for its line. Returns the lines loaded.
    #[inline]
    pub fn load_room(&self, bytes: usize) -> usize {
        load_between(self.data, self.used, self.used.saturating_add(bytes))
    }

    /// Bytes of data written.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Null rows written.
    pub fn nulls(&self) -> usize {
        self.nulls
    }

    #[inline]
    fn append(&mut self, bytes: &[u8]) -> Result<(), GatherError> {
        let end = self
            .used
            .checked_add(bytes.len())
            .ok_or(GatherError::Room)?;
        let room = self.data.get_mut(self.used..end).ok_or(GatherError::Room)?;
        copy_short(room, bytes);
        self.used = end;
        Ok(())
    }

    #[inline]
    fn end_row(&mut self, valid: bool) -> Result<(), GatherError> {
        let at = i32::try_from(self.used).map_err(|_| GatherError::Shape)?;
        *self
            .offsets
            .get_mut(self.rows + 1)
            .ok_or(GatherError::Shape)? = at;
        if valid {
            if let Some(bits) = self.validity.as_deref_mut() {
                *bits.get_mut(self.rows / 8).ok_or(GatherError::Shape)? |= 1 << (self.rows % 8);
            }
        } else {
            self.nulls += 1;
        }
        self.rows += 1;
        Ok(())
    }

    /// A row of the bytes as they are.
    #[inline]
    pub fn push(&mut self, value: &[u8]) -> Result<(), GatherError> {
        self.append(value)?;
        self.end_row(true)
    }

    /// A row of text: the bytes as they are when `well_formed` (UTF-8), else as [`Self::push_text`] makes them.
    #[inline]
    pub fn push_str(&mut self, value: &[u8], well_formed: bool) -> Result<(), GatherError> {
        if well_formed {
            self.push(value)
        } else {
            self.push_text(value)
        }
    }

    /// A row of the bytes as UTF-8 text, ill-formed sequences replaced by U+FFFD.
    pub fn push_text(&mut self, value: &[u8]) -> Result<(), GatherError> {
        self.append_text(value)?;
        self.end_row(true)
    }

    fn append_text(&mut self, value: &[u8]) -> Result<(), GatherError> {
        if is_utf8(value) {
            return self.append(value);
        }
        for chunk in value.utf8_chunks() {
            self.append(chunk.valid().as_bytes())?;
            if !chunk.invalid().is_empty() {
                self.append(REPLACEMENT)?;
            }
        }
        Ok(())
    }

    /// A null row (no bytes; it needs a validity bitmap).
    #[inline]
    pub fn push_null(&mut self) -> Result<(), GatherError> {
        if self.validity.is_none() {
            return Err(GatherError::Shape);
        }
        self.end_row(false)
    }

    /// Every row written: the offsets are full.
    /// Checks that every row was written (`exact`), or at most the rows there is room for.
    fn finish(&self, exact: bool) -> Result<(), GatherError> {
        if self.rows + 1 == self.offsets.len() || (!exact && self.rows < self.offsets.len()) {
            Ok(())
        } else {
            Err(GatherError::Shape)
        }
    }
}

/// Copies `src` into `dst` (of the same length): a short value (a name, a tag, a host) with two overlapping
/// word copies inline, a longer one with `copy_from_slice` (a call to `memcpy`, whose set-up a short value
/// does not repay).
#[inline(always)]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    // N <= len <= 2N: the first N bytes and the last N cover the value
    fn ends<const N: usize>(dst: &mut [u8], src: &[u8]) {
        let Some(last) = src.len().checked_sub(N) else {
            return;
        };
        let head: Option<[u8; N]> = src.get(..N).and_then(|h| h.try_into().ok());
        let tail: Option<[u8; N]> = src.get(last..).and_then(|t| t.try_into().ok());
        if let (Some(head), Some(tail)) = (head, tail) {
            if let Some(d) = dst.get_mut(last..) {
                d.copy_from_slice(&tail);
            }
            if let Some(d) = dst.get_mut(..N) {
                d.copy_from_slice(&head);
            }
        }
    }
    match src.len() {
        0 => {}
        1..4 => {
            for (d, s) in dst.iter_mut().zip(src) {
                *d = *s;
            }
        }
        4..8 => ends::<4>(dst, src),
        8..16 => ends::<8>(dst, src),
        16..=32 => ends::<16>(dst, src),
        _ => dst.copy_from_slice(src),
    }
}

/// The properties map column: per row its pairs' range (map offsets), and the names and values as strings.
pub struct MapOut<'a> {
    pub offsets: &'a mut [i32],
    pub names: BinaryOut<'a>,
    pub values: BinaryOut<'a>,
}

/// The keys column: per row the range of its tokens (list offsets), and the tokens as strings.
pub struct ListOut<'a> {
    pub offsets: &'a mut [i32],
    pub tokens: BinaryOut<'a>,
}

/// The columns a decode fills: those left None are not requested.
#[derive(Default)]
pub struct Outputs<'a> {
    pub topic: Option<BinaryOut<'a>>,
    pub body: Option<BinaryOut<'a>>,
    pub properties_string: Option<BinaryOut<'a>>,
    pub properties: Option<MapOut<'a>>,
    pub tags: Option<BinaryOut<'a>>,
    pub uniq_key: Option<BinaryOut<'a>>,
    pub keys: Option<ListOut<'a>>,
    pub msg_id: Option<BinaryOut<'a>>,
    pub born_host: Option<BinaryOut<'a>>,
    pub store_host: Option<BinaryOut<'a>>,
}

/// Whether `bytes` are well-formed UTF-8: then every part split at ASCII separators is too, and is copied as
/// it is.
#[inline]
fn is_utf8(bytes: &[u8]) -> bool {
    bytes.is_ascii() || std::str::from_utf8(bytes).is_ok()
}

/// The places of one sound record's fields the decode reads (from its header columns).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Places {
    pub sysflag: i64,
    pub phy_offset: i64,
    pub born_host_pos: i64,
    pub store_host_pos: i64,
    pub body_pos: i64,
    pub body_len: i64,
    pub topic_pos: i64,
    pub topic_len: i64,
    pub props_pos: i64,
    pub props_len: i64,
}

impl Places {
    /// The places of a record parsed by [`crate::header::parse_record`].
    fn of_row(row: &[i64; header::COLUMNS]) -> Self {
        let c = |column: header::Column| row[column as usize];
        Self {
            sysflag: c(header::Column::Sysflag),
            phy_offset: c(header::Column::PhyOffset),
            born_host_pos: c(header::Column::BornHostPos),
            store_host_pos: c(header::Column::StoreHostPos),
            body_pos: c(header::Column::BodyPos),
            body_len: c(header::Column::BodyLen),
            topic_pos: c(header::Column::TopicPos),
            topic_len: c(header::Column::TopicLen),
            props_pos: c(header::Column::PropsPos),
            props_len: c(header::Column::PropsLen),
        }
    }
}

/// The text of the last host field a column printed, reused while the next records carry the same bytes (a
/// store's records come from a few producers through one broker: most rows repeat the row before).
#[derive(Default)]
struct HostMemo {
    /// The host field printed last (its first `len` bytes), None before the first.
    key: Option<([u8; IPV6_HOST_LENGTH], usize)>,
    text: ShortText,
}

impl HostMemo {
    /// [`host_text`] of `host` (an 8- or 20-byte host field), None for another width.
    #[inline]
    fn text(&mut self, host: &[u8]) -> Option<&[u8]> {
        let same = self
            .key
            .as_ref()
            .is_some_and(|(bytes, len)| bytes.get(..*len) == Some(host));
        if !same {
            self.text = host_text(host)?;
            let mut bytes = [0u8; IPV6_HOST_LENGTH];
            bytes.get_mut(..host.len())?.copy_from_slice(host);
            self.key = Some((bytes, host.len()));
        }
        Some(self.text.as_bytes())
    }
}

/// The msgId of the last record, whose store host's digits the next records reuse while their store host is
/// the same (only the offset's 16 digits change).
struct MsgIdMemo {
    /// The store host field of the msgId kept (its first `len` bytes), None before the first.
    key: Option<([u8; IPV6_HOST_LENGTH], usize)>,
    text: [u8; MAX_MSG_ID_TEXT],
    len: usize,
}

impl Default for MsgIdMemo {
    fn default() -> Self {
        Self {
            key: None,
            text: [0; MAX_MSG_ID_TEXT],
            len: 0,
        }
    }
}

impl MsgIdMemo {
    /// [`msg_id_text`] of `store_host` and `phy_offset`.
    #[inline]
    fn text(&mut self, store_host: &[u8], phy_offset: i64) -> &[u8] {
        let same = self
            .key
            .as_ref()
            .is_some_and(|(bytes, len)| bytes.get(..*len) == Some(store_host));
        let digits = self
            .len
            .checked_sub(16)
            .and_then(|at| self.text.get_mut(at..self.len));
        match digits {
            Some(digits) if same => digits.copy_from_slice(&offset_hex_text(phy_offset)),
            _ => {
                (self.text, self.len) = msg_id_text(store_host, phy_offset);
                let mut bytes = [0u8; IPV6_HOST_LENGTH];
                let kept = store_host.len().min(IPV6_HOST_LENGTH);
                if let (Some(d), Some(h)) = (bytes.get_mut(..kept), store_host.get(..kept)) {
                    d.copy_from_slice(h);
                }
                // a host wider than a host field is never taken for another
                self.key = (kept == store_host.len()).then_some((bytes, kept));
            }
        }
        self.text.get(..self.len).unwrap_or_default()
    }
}

/// A decode in progress: the outputs, filled one record at a time, and what they ask for.
struct Decoder<'o, 'a> {
    out: &'o mut Outputs<'a>,
    rows: usize,
    pairs: Vec<(usize, usize, usize, usize)>,
    counts: Counts,
    wants_pairs: bool,
    wants_properties: bool,
    born_hosts: HostMemo,
    store_hosts: HostMemo,
    msg_ids: MsgIdMemo,
}

impl<'o, 'a> Decoder<'o, 'a> {
    fn new(out: &'o mut Outputs<'a>) -> Result<Self, GatherError> {
        let wants_pairs = out.properties.is_some()
            || out.tags.is_some()
            || out.uniq_key.is_some()
            || out.keys.is_some();
        let wants_properties = wants_pairs || out.properties_string.is_some();
        if let Some(map) = out.properties.as_mut() {
            *map.offsets.first_mut().ok_or(GatherError::Shape)? = 0;
        }
        if let Some(keys) = out.keys.as_mut() {
            *keys.offsets.first_mut().ok_or(GatherError::Shape)? = 0;
        }
        Ok(Self {
            out,
            rows: 0,
            pairs: Vec::new(),
            counts: Counts::default(),
            wants_pairs,
            wants_properties,
            born_hosts: HostMemo::default(),
            store_hosts: HostMemo::default(),
            msg_ids: MsgIdMemo::default(),
        })
    }

    /// The cache lines of a record's fields worth loading ahead (the body is copied in order: the CPU
    /// prefetches it).
    fn scattered_places(&self, p: &Places) -> [i64; 4] {
        let wants_header = self.out.msg_id.is_some()
            || self.out.born_host.is_some()
            || self.out.store_host.is_some();
        let pick = |wanted: bool, at: i64| if wanted { at } else { -1 };
        [
            pick(wants_header, p.born_host_pos),
            pick(self.out.topic.is_some(), p.topic_pos),
            pick(self.wants_properties, p.props_pos),
            pick(self.wants_properties && p.props_len > 64, p.props_pos + 64),
        ]
    }

    /// One record's row of every column; `OutOfRange(row)` when a field does not lie inside `buf`.
    fn record(&mut self, buf: &[u8], p: &Places) -> Result<(), GatherError> {
        let row = self.rows;
        let part = |pos: i64, len: i64| span(buf, pos, len).ok_or(GatherError::OutOfRange(row));
        if let Some(topic) = self.out.topic.as_mut() {
            topic.push_text(part(p.topic_pos, p.topic_len)?)?;
        }
        if let Some(body) = self.out.body.as_mut() {
            body.push(part(p.body_pos, p.body_len)?)?;
        }
        if self.wants_properties {
            let properties = part(p.props_pos, p.props_len)?;
            let text = is_utf8(properties);
            if let Some(string) = self.out.properties_string.as_mut() {
                string.push_str(properties, text)?;
            }
            if self.wants_pairs {
                self.properties(properties, text)?;
            }
        }
        if let Some(msg_id) = self.out.msg_id.as_mut() {
            let host = host_at(buf, p.store_host_pos, p.sysflag, STOREHOSTADDRESS_V6_FLAG)
                .ok_or(GatherError::OutOfRange(row))?;
            msg_id.push(self.msg_ids.text(host, p.phy_offset))?;
        }
        for (host_out, memo, pos, v6) in [
            (
                self.out.born_host.as_mut(),
                &mut self.born_hosts,
                p.born_host_pos,
                BORNHOST_V6_FLAG,
            ),
            (
                self.out.store_host.as_mut(),
                &mut self.store_hosts,
                p.store_host_pos,
                STOREHOSTADDRESS_V6_FLAG,
            ),
        ] {
            if let Some(host_out) = host_out {
                let host = host_at(buf, pos, p.sysflag, v6).ok_or(GatherError::OutOfRange(row))?;
                let text = memo.text(host).ok_or(GatherError::OutOfRange(row))?;
                host_out.push(text)?;
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// The row of a record that failed its checks: empty values, null tags and uniqKey, no pairs or keys.
    fn failed_record(&mut self) -> Result<(), GatherError> {
        let out = &mut *self.out;
        for column in [
            out.topic.as_mut(),
            out.body.as_mut(),
            out.properties_string.as_mut(),
            out.msg_id.as_mut(),
            out.born_host.as_mut(),
            out.store_host.as_mut(),
        ]
        .into_iter()
        .flatten()
        {
            column.push(&[])?;
        }
        for column in [out.tags.as_mut(), out.uniq_key.as_mut()]
            .into_iter()
            .flatten()
        {
            column.push_null()?;
        }
        self.end_lists()?;
        self.rows += 1;
        Ok(())
    }

    /// The properties map, tags, uniqKey and keys of one record's properties string (`text`: well-formed UTF-8).
    fn properties(&mut self, properties: &[u8], text: bool) -> Result<(), GatherError> {
        kept_pairs(properties, &mut self.pairs);
        let of = |at: usize, len: usize| properties.get(at..at + len).unwrap_or_default();
        let (mut tags, mut uniq_key, mut keys) = (None, None, None);
        for &(name_at, name_len, value_at, value_len) in &self.pairs {
            let (name, value) = (of(name_at, name_len), of(value_at, value_len));
            if let Some(map) = self.out.properties.as_mut() {
                map.names.push_str(name, text)?;
                map.values.push_str(value, text)?;
            }
            match name {
                PROPERTY_TAGS => tags = Some(value),
                PROPERTY_KEYS => keys = Some(value),
                PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX => uniq_key = Some(value),
                _ => {}
            }
        }
        self.counts.pairs += if self.out.properties.is_some() {
            self.pairs.len()
        } else {
            0
        };
        for (column, value) in [
            (self.out.tags.as_mut(), tags),
            (self.out.uniq_key.as_mut(), uniq_key),
        ] {
            if let Some(column) = column {
                match value {
                    Some(value) => column.push_str(value, text)?,
                    None => column.push_null()?,
                }
            }
        }
        if let (Some(list), Some(value)) = (self.out.keys.as_mut(), keys) {
            for token in value
                .split(|&b| b == KEY_SEPARATOR)
                .filter(|t| !t.is_empty())
            {
                list.tokens.push_str(token, text)?;
                self.counts.tokens += 1;
            }
        }
        self.end_lists()
    }

    /// Ends the current row of the properties map and the keys (their pairs and tokens so far).
    fn end_lists(&mut self) -> Result<(), GatherError> {
        let row = self.rows;
        if let Some(map) = self.out.properties.as_mut() {
            let end = i32::try_from(self.counts.pairs).map_err(|_| GatherError::Shape)?;
            *map.offsets.get_mut(row + 1).ok_or(GatherError::Shape)? = end;
        }
        if let Some(keys) = self.out.keys.as_mut() {
            let end = i32::try_from(self.counts.tokens).map_err(|_| GatherError::Shape)?;
            *keys.offsets.get_mut(row + 1).ok_or(GatherError::Shape)? = end;
        }
        Ok(())
    }

    /// Every row written: the offsets are full (the names, values and tokens fill only part of their room: the
    /// caller reads their counts).
    /// The counts, once every output has a row per record (`exact`; else at most as many rows as there is
    /// room for: the rows of the records a test kept).
    fn finish(self, exact: bool) -> Result<Counts, GatherError> {
        let out = &*self.out;
        for column in [
            &out.topic,
            &out.body,
            &out.properties_string,
            &out.tags,
            &out.uniq_key,
            &out.msg_id,
            &out.born_host,
            &out.store_host,
        ]
        .into_iter()
        .flatten()
        {
            column.finish(exact)?;
        }
        let whole = |offsets: &[i32]| {
            offsets.len() == self.rows + 1 || (!exact && self.rows < offsets.len())
        };
        if out.properties.as_ref().is_some_and(|m| !whole(m.offsets))
            || out.keys.as_ref().is_some_and(|k| !whole(k.offsets))
        {
            return Err(GatherError::Shape);
        }
        Ok(self.counts)
    }
}

/// Fills every column of `out` for the `n` records described by `inputs` (`DECODE_INPUTS × n`, row-major).
/// A record whose fields do not lie inside `buf` is `OutOfRange(row)`; outputs of the wrong sizes are `Shape`,
/// a data buffer too small for its values `Room`.
pub fn decode(buf: &[u8], inputs: &[i64], out: &mut Outputs<'_>) -> Result<Counts, GatherError> {
    if inputs.len() % DECODE_INPUTS.len() != 0 {
        return Err(GatherError::Shape);
    }
    let n = inputs.len() / DECODE_INPUTS.len();
    let column = |c: Input| {
        inputs
            .get(c as usize * n..(c as usize + 1) * n)
            .unwrap_or_default()
    };
    let places = |i: usize| {
        let at = |c: Input| column(c).get(i).copied().unwrap_or(-1);
        Places {
            sysflag: at(Input::Sysflag),
            phy_offset: at(Input::PhyOffset),
            born_host_pos: at(Input::BornHostPos),
            store_host_pos: at(Input::StoreHostPos),
            body_pos: at(Input::BodyPos),
            body_len: at(Input::BodyLen),
            topic_pos: at(Input::TopicPos),
            topic_len: at(Input::TopicLen),
            props_pos: at(Input::PropsPos),
            props_len: at(Input::PropsLen),
        }
    };
    let mut decoder = Decoder::new(out)?;
    for i in 0..n {
        if i % READ_AHEAD == 0 {
            // the fields of the records ahead are scattered: their lines are loaded together
            let ahead = (i + READ_AHEAD..n.min(i + 2 * READ_AHEAD))
                .flat_map(|k| decoder.scattered_places(&places(k)));
            load_lines(buf, ahead);
        }
        decoder.record(buf, &places(i))?;
    }
    decoder.finish(true)
}

/// [`crate::header::parse_records`] and [`decode`] in one pass: each record at `positions` is parsed and checked
/// (the CRC checks of `crc_mode`) into `columns` and `problems`, and, when it passed, decoded into `out` while
/// its bytes are in the cache. Without a `test` every record gets a row, a record that failed an empty one (null
/// tags and uniqKey, no pairs, no keys). With a queue test and its `kept` marks (one per record), only the
/// records that passed their checks and that the test keeps ([`QueueTest::keeps`]) are decoded, their rows in
/// order, and `kept[i]` says whether record `i` was. Returns the number of records that failed a check, the rows
/// written, and the pairs and tokens written. A data buffer too small for its values is `Room` (the caller sized
/// it from the records' bytes: ill-formed text grows), other outputs of the wrong sizes `Shape`.
pub fn decode_records(
    buf: &[u8],
    positions: &[i64],
    columns: &mut [i64],
    problems: &mut [i8],
    crc_mode: u8,
    mut test: Option<(&QueueTest, &mut [u8])>,
    out: &mut Outputs<'_>,
) -> Result<(usize, usize, Counts), GatherError> {
    if test
        .as_ref()
        .is_some_and(|(_, kept)| kept.len() != positions.len())
    {
        return Err(GatherError::Shape);
    }
    let n = positions.len();
    if header::COLUMNS.checked_mul(n) != Some(columns.len()) || problems.len() != n {
        return Err(GatherError::Shape);
    }
    let mut decoder = Decoder::new(out)?;
    let (mut failed, mut rows) = (0, 0);
    let mut last_topic = None;
    for (i, (&pos, problem)) in positions.iter().zip(problems.iter_mut()).enumerate() {
        if i % READ_AHEAD == 0 {
            let ahead = positions.get(i + READ_AHEAD..).unwrap_or_default().iter();
            if let Some(body) = decoder.out.body.as_ref() {
                // bodies are copied nearly whole: every line of the records ahead, and as much of the room the
                // bodies decoded next go to as those records span (a body is shorter than its record)
                let lines = load_records(buf, ahead.take(READ_AHEAD).copied());
                body.load_room(64 * lines);
            } else {
                load_lines(buf, ahead.take(READ_AHEAD).flat_map(|&p| [p, p + 64]));
            }
            // the records loaded one step ago: their ends (topic and properties) after their bodies
            let now = positions.get(i..).unwrap_or_default().iter();
            load_tails(buf, now.take(READ_AHEAD).copied());
        }
        let (row, code) = header::parse_checked(buf, pos, crc_mode);
        header::store_row(columns, n, i, &row);
        *problem = code;
        if code != header::PROBLEM_NONE {
            failed += 1;
            match test.as_mut() {
                Some((_, kept)) => kept[i] = 0,
                None => {
                    decoder.failed_record()?;
                    rows += 1;
                }
            }
            continue;
        }
        // a sound record's fields lie inside `buf`: no OutOfRange
        let places = Places::of_row(&row);
        if let Some((test, kept)) = test.as_mut() {
            let topic = span(
                buf,
                row[header::Column::TopicPos as usize],
                row[header::Column::TopicLen as usize],
            )
            .ok_or(GatherError::OutOfRange(i))?;
            let keep = test.keeps(
                topic,
                row[header::Column::Sysflag as usize],
                row[header::Column::QueueId as usize],
                row[header::Column::QueueOffset as usize],
                &mut last_topic,
            );
            kept[i] = u8::from(keep);
            if !keep {
                continue;
            }
        }
        decoder.record(buf, &places)?;
        rows += 1;
    }
    let exact = test.is_none();
    Ok((failed, rows, decoder.finish(exact)?))
}

/// What a decode wrote besides each column's bytes: the properties map's pairs and the keys' tokens.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub pairs: usize,
    pub tokens: usize,
}

/// The most keys tokens the properties of `props_bytes` total bytes in `rows` rows can hold (a token and its
/// separator take at least 2 bytes).
pub fn max_key_tokens(props_bytes: usize, rows: usize) -> usize {
    props_bytes / 2 + rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Owned buffers of one binary column.
    struct Col {
        offsets: Vec<i32>,
        data: Vec<u8>,
        validity: Option<Vec<u8>>,
    }

    impl Col {
        fn new(rows: usize, bytes: usize, nullable: bool) -> Self {
            Col {
                offsets: vec![-7; rows + 1],
                data: vec![0xEE; bytes],
                validity: nullable.then(|| vec![0xFF; rows.div_ceil(8)]),
            }
        }

        fn out(&mut self) -> BinaryOut<'_> {
            BinaryOut::new(
                &mut self.offsets,
                &mut self.data,
                self.validity.as_deref_mut(),
            )
        }

        fn values(&self, rows: usize) -> Vec<Option<Vec<u8>>> {
            (0..rows)
                .map(|i| {
                    let valid = self
                        .validity
                        .as_ref()
                        .is_none_or(|v| v[i / 8] & (1 << (i % 8)) != 0);
                    let (a, b) = (self.offsets[i] as usize, self.offsets[i + 1] as usize);
                    valid.then(|| self.data[a..b].to_vec())
                })
                .collect()
        }
    }

    #[test]
    fn room_is_loaded_from_the_next_value_to_the_end_of_the_data() {
        let mut col = Col::new(4, 1000, false);
        let mut out = col.out();
        // lines at 0, 64, .., 192 of the room's first 200 bytes; the whole room; none past it
        assert_eq!(out.load_room(200), 4);
        assert_eq!(out.load_room(usize::MAX), 1000usize.div_ceil(64));
        out.push(&[1u8; 900]).unwrap();
        assert_eq!(out.load_room(500), 2); // from 900 to the end (1000): lines at 900 and 964
        out.push(&[2u8; 100]).unwrap();
        assert_eq!(out.load_room(64), 0);
        assert_eq!(col.values(2)[1], Some(vec![2u8; 100]));
    }

    /// Two records' variable fields laid out in one buffer, and their input rows.
    fn sample() -> (Vec<u8>, Vec<i64>) {
        let mut buf = Vec::new();
        let mut put = |bytes: &[u8]| {
            let at = buf.len() as i64;
            buf.extend_from_slice(bytes);
            (at, bytes.len() as i64)
        };
        let born0 = put(&[10, 0, 0, 1, 0, 0, 0x2A, 0x6F]);
        let store0 = put(&[127, 0, 0, 1, 0, 0, 0x2A, 0x9F]);
        let mut v6 = vec![
            0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a, 0, 1,
        ];
        v6.extend(9876u32.to_be_bytes());
        let born1 = put(&v6);
        let store1 = put(&v6);
        let body0 = put(b"hello");
        let body1 = put(b"");
        let topic0 = put(b"T\xFFopic"); // an ill-formed byte
        let topic1 = put("тема".as_bytes());
        let props0 =
            put(b"TAGS\x01a\x02KEYS\x01k1  k2 \x02EMPTY\x01\x02TAGS\x01b\x02UNIQ_KEY\x01U1");
        let props1 = put(b"");
        let rows: [[i64; 10]; 2] = [
            [
                0, 0x1234, born0.0, store0.0, body0.0, body0.1, topic0.0, topic0.1, props0.0,
                props0.1,
            ],
            [
                0x30, 7, born1.0, store1.0, body1.0, body1.1, topic1.0, topic1.1, props1.0,
                props1.1,
            ],
        ];
        let inputs = (0..10)
            .flat_map(|c| rows.iter().map(move |r| r[c]))
            .collect();
        (buf, inputs)
    }

    fn text(values: &[Option<Vec<u8>>]) -> Vec<Option<String>> {
        values
            .iter()
            .map(|v| v.as_ref().map(|b| String::from_utf8(b.clone()).unwrap()))
            .collect()
    }

    /// Hosts repeat from record to record (a few producers, one broker) and change: each row prints its own.
    #[test]
    fn repeated_and_changing_hosts_print_each_row_own() {
        let v4 = |a: u8, port: u32| [&[10, 0, 0, a][..], &port.to_be_bytes()].concat();
        let v6 = |a: u8, port: u32| {
            let mut address = vec![0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, a];
            address.extend(port.to_be_bytes());
            address
        };
        // (born host, store host, both IPv6?) per record: runs of the same, a change of port only, v4 ↔ v6
        let hosts = [
            (v4(1, 7), v4(9, 10911), false),
            (v4(1, 7), v4(9, 10911), false),
            (v4(1, 8), v4(9, 10911), false),
            (v6(1, 8), v6(9, 10911), true),
            (v6(1, 8), v6(9, 10911), true),
            (v6(2, 8), v6(9, 10912), true),
            (v4(2, 8), v4(9, 10912), false),
            (v4(1, 7), v4(9, 10911), false),
        ];
        let n = hosts.len();
        let mut buf = Vec::new();
        let mut rows = Vec::new();
        for (i, (born, store, ipv6)) in hosts.iter().enumerate() {
            let (born_at, store_at) = (buf.len() as i64, (buf.len() + born.len()) as i64);
            buf.extend_from_slice(born);
            buf.extend_from_slice(store);
            let sysflag = if *ipv6 {
                i64::from(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG)
            } else {
                0
            };
            let phy = 0x0102_0304_0506_0700 + i as i64;
            rows.push([sysflag, phy, born_at, store_at, 0, 0, 0, 0, 0, 0]);
        }
        let inputs: Vec<i64> = (0..10)
            .flat_map(|c| rows.iter().map(move |r| r[c]))
            .collect();
        let mut cols: Vec<Col> = (0..3)
            .map(|_| Col::new(n, n * MAX_MSG_ID_TEXT, false))
            .collect();
        let [msg_id, born, store] = &mut cols[..] else {
            unreachable!()
        };
        let mut out = Outputs {
            msg_id: Some(msg_id.out()),
            born_host: Some(born.out()),
            store_host: Some(store.out()),
            ..Outputs::default()
        };
        decode(&buf, &inputs, &mut out).unwrap();
        for (i, (b, s, _)) in hosts.iter().enumerate() {
            let phy = rows[i][1];
            let (id, len) = msg_id_text(s, phy);
            assert_eq!(msg_id.values(n)[i].as_deref(), Some(&id[..len]), "row {i}");
            assert_eq!(
                born.values(n)[i].as_deref(),
                Some(host_text(b).unwrap().as_bytes()),
                "row {i}"
            );
            assert_eq!(
                store.values(n)[i].as_deref(),
                Some(host_text(s).unwrap().as_bytes()),
                "row {i}"
            );
        }
        assert_eq!(
            String::from_utf8(store.values(n)[3].clone().unwrap()).unwrap(),
            "[2001:db8:0:0:0:0:0:9]:10911"
        );
    }

    #[test]
    fn one_pass_fills_every_column() {
        let (buf, inputs) = sample();
        let props = 80;
        let mut cols: Vec<Col> = (0..8).map(|_| Col::new(2, 3 * props, false)).collect();
        let (mut tags, mut uniq) = (Col::new(2, 3 * props, true), Col::new(2, 3 * props, true));
        let (mut names, mut values, mut tokens) = (
            Col::new(40, 3 * props, false),
            Col::new(40, 3 * props, false),
            Col::new(60, 3 * props, false),
        );
        let (mut map_offsets, mut key_offsets) = (vec![0i32; 3], vec![0i32; 3]);
        let [topic, body, string, msg_id, born, store, ..] = &mut cols[..] else {
            unreachable!()
        };
        let mut out = Outputs {
            topic: Some(topic.out()),
            body: Some(body.out()),
            properties_string: Some(string.out()),
            properties: Some(MapOut {
                offsets: &mut map_offsets,
                names: names.out(),
                values: values.out(),
            }),
            tags: Some(tags.out()),
            uniq_key: Some(uniq.out()),
            keys: Some(ListOut {
                offsets: &mut key_offsets,
                tokens: tokens.out(),
            }),
            msg_id: Some(msg_id.out()),
            born_host: Some(born.out()),
            store_host: Some(store.out()),
        };
        let counts = decode(&buf, &inputs, &mut out).unwrap();
        assert_eq!(
            counts,
            Counts {
                pairs: 3,
                tokens: 2
            }
        );
        assert_eq!(
            text(&topic.values(2)),
            [Some("T\u{FFFD}opic".into()), Some("тема".into())]
        );
        assert_eq!(body.values(2), [Some(b"hello".to_vec()), Some(vec![])]);
        assert_eq!(map_offsets, [0, 3, 3]);
        assert_eq!(
            text(&names.values(3)),
            [
                Some("KEYS".into()),
                Some("TAGS".into()),
                Some("UNIQ_KEY".into())
            ]
        );
        assert_eq!(
            text(&values.values(3)),
            [Some("k1  k2 ".into()), Some("b".into()), Some("U1".into())]
        );
        assert_eq!(text(&tags.values(2)), [Some("b".into()), None]);
        assert_eq!(text(&uniq.values(2)), [Some("U1".into()), None]);
        assert_eq!(key_offsets, [0, 2, 2]);
        assert_eq!(
            text(&tokens.values(2)),
            [Some("k1".into()), Some("k2".into())]
        );
        assert_eq!(
            text(&msg_id.values(2)),
            [
                Some("7F00000100002A9F0000000000001234".into()),
                Some("20010DB80000000000000000000A000100002694".to_string() + "0000000000000007"),
            ]
        );
        assert_eq!(
            text(&born.values(2)),
            [
                Some("10.0.0.1:10863".into()),
                Some("[2001:db8:0:0:0:0:a:1]:9876".into())
            ]
        );
        assert_eq!(
            text(&store.values(2))[1],
            Some("[2001:db8:0:0:0:0:a:1]:9876".into())
        );
        assert_eq!(string.values(2)[1], Some(vec![]));
    }

    #[test]
    fn fields_outside_the_buffer_and_wrong_outputs_fail() {
        let (buf, mut inputs) = sample();
        let mut body = Col::new(2, 5, false);
        let mut out = Outputs {
            body: Some(body.out()),
            ..Outputs::default()
        };
        assert_eq!(decode(&buf, &inputs, &mut out), Ok(Counts::default()));
        inputs[Input::BodyLen as usize * 2 + 1] = 1 << 40; // the second record's body runs past the buffer
        let mut body = Col::new(2, 5, false);
        let mut out = Outputs {
            body: Some(body.out()),
            ..Outputs::default()
        };
        assert_eq!(
            decode(&buf, &inputs, &mut out),
            Err(GatherError::OutOfRange(1))
        );
        let (buf, inputs) = sample();
        let mut small = Col::new(2, 4, false);
        let mut out = Outputs {
            body: Some(small.out()),
            ..Outputs::default()
        };
        assert_eq!(decode(&buf, &inputs, &mut out), Err(GatherError::Room));
        let mut short = Col::new(1, 5, false);
        let mut out = Outputs {
            body: Some(short.out()),
            ..Outputs::default()
        };
        assert_eq!(decode(&buf, &inputs, &mut out), Err(GatherError::Shape));
        let mut tags = Col::new(2, 10, false); // a nullable column without its validity
        let mut out = Outputs {
            tags: Some(tags.out()),
            ..Outputs::default()
        };
        assert_eq!(decode(&buf, &inputs, &mut out), Err(GatherError::Shape));
        assert_eq!(
            decode(&buf, &inputs[1..], &mut Outputs::default()),
            Err(GatherError::Shape)
        );
    }

    /// One record's values in every column (then its map's names and values, then its keys).
    type Row = Vec<Option<Vec<u8>>>;

    /// Owned buffers of every column, sized for `rows` records of `bytes` bytes (text bounded `text_room`).
    struct AllCols {
        cols: Vec<Col>,
        tags: Col,
        uniq: Col,
        names: Col,
        values: Col,
        tokens: Col,
        map_offsets: Vec<i32>,
        key_offsets: Vec<i32>,
    }

    impl AllCols {
        fn new(rows: usize, bytes: usize, text_room: usize) -> Self {
            let pairs = crate::columns::max_property_pairs(bytes, rows);
            let tokens = max_key_tokens(bytes, rows);
            let mut cols: Vec<Col> = (0..3).map(|_| Col::new(rows, text_room, false)).collect();
            cols[1] = Col::new(rows, bytes, false); // the body
            cols.push(Col::new(
                rows,
                rows * crate::columns::MAX_MSG_ID_TEXT,
                false,
            ));
            cols.push(Col::new(rows, rows * crate::columns::MAX_HOST_TEXT, false));
            cols.push(Col::new(rows, rows * crate::columns::MAX_HOST_TEXT, false));
            AllCols {
                cols,
                tags: Col::new(rows, text_room, true),
                uniq: Col::new(rows, text_room, true),
                names: Col::new(pairs, text_room, false),
                values: Col::new(pairs, text_room, false),
                tokens: Col::new(tokens, text_room, false),
                map_offsets: vec![0; rows + 1],
                key_offsets: vec![0; rows + 1],
            }
        }

        fn outputs(&mut self) -> Outputs<'_> {
            let [topic, body, string, msg_id, born, store] = &mut self.cols[..] else {
                unreachable!()
            };
            Outputs {
                topic: Some(topic.out()),
                body: Some(body.out()),
                properties_string: Some(string.out()),
                properties: Some(MapOut {
                    offsets: &mut self.map_offsets,
                    names: self.names.out(),
                    values: self.values.out(),
                }),
                tags: Some(self.tags.out()),
                uniq_key: Some(self.uniq.out()),
                keys: Some(ListOut {
                    offsets: &mut self.key_offsets,
                    tokens: self.tokens.out(),
                }),
                msg_id: Some(msg_id.out()),
                born_host: Some(born.out()),
                store_host: Some(store.out()),
            }
        }

        /// Every row of every column: the values per record, the map's and the keys' entries per record.
        fn rows(&self, rows: usize, counts: Counts) -> Vec<Row> {
            let mut out: Vec<Row> = vec![Vec::new(); rows];
            for col in self.cols.iter().chain([&self.tags, &self.uniq]) {
                for (row, value) in out.iter_mut().zip(col.values(rows)) {
                    row.push(value);
                }
            }
            let (names, values) = (
                self.names.values(counts.pairs),
                self.values.values(counts.pairs),
            );
            let tokens = self.tokens.values(counts.tokens);
            for (i, row) in out.iter_mut().enumerate() {
                let (a, b) = (
                    self.map_offsets[i] as usize,
                    self.map_offsets[i + 1] as usize,
                );
                for k in a..b {
                    row.extend([names[k].clone(), values[k].clone()]);
                }
                let (a, b) = (
                    self.key_offsets[i] as usize,
                    self.key_offsets[i + 1] as usize,
                );
                row.extend(tokens[a..b].iter().cloned());
            }
            out
        }
    }

    /// The fused decode of `positions` and, for comparison, the header parse then [`decode`] of the records that
    /// passed: both give the same rows, a failed record's row is empty. Returns the rows and the problems.
    fn decode_both(buf: &[u8], positions: &[i64], crc_mode: u8) -> (Vec<Row>, Vec<i8>) {
        let n = positions.len();
        let mut header_columns = vec![0i64; header::COLUMNS * n];
        let mut problems = vec![0i8; n];
        let mut fused = AllCols::new(n, buf.len(), 3 * buf.len());
        let (failed, written, counts) = decode_records(
            buf,
            positions,
            &mut header_columns,
            &mut problems,
            crc_mode,
            None,
            &mut fused.outputs(),
        )
        .unwrap();
        assert_eq!(failed, problems.iter().filter(|&&p| p != 0).count());
        assert_eq!(written, n);
        let rows = fused.rows(n, counts);
        let mut expected_columns = vec![0i64; header::COLUMNS * n];
        let mut expected_problems = vec![0i8; n];
        header::parse_records(
            buf,
            positions,
            &mut expected_columns,
            &mut expected_problems,
            crc_mode,
        )
        .unwrap();
        assert_eq!(
            (&header_columns, &problems),
            (&expected_columns, &expected_problems)
        );
        let sound: Vec<usize> = (0..n).filter(|&i| problems[i] == 0).collect();
        let header_columns = &header_columns;
        let inputs: Vec<i64> = DECODE_INPUTS
            .iter()
            .flat_map(|name| {
                let c = header::COLUMN_NAMES.iter().position(|h| h == name).unwrap();
                let sound = &sound;
                sound.iter().map(move |&i| header_columns[c * n + i])
            })
            .collect();
        let mut two_pass = AllCols::new(sound.len(), buf.len(), 3 * buf.len());
        let counts = decode(buf, &inputs, &mut two_pass.outputs()).unwrap();
        let expected = two_pass.rows(sound.len(), counts);
        for (k, &i) in sound.iter().enumerate() {
            assert_eq!(rows[i], expected[k], "record {i}");
        }
        let empty = [vec![Some(vec![]); 6], vec![None, None]].concat();
        for i in (0..n).filter(|&i| problems[i] != 0) {
            assert_eq!(rows[i], empty, "failed record {i}");
        }
        decode_kept_both(buf, positions, crc_mode, (header_columns, &problems), &rows);
        (rows, problems)
    }

    /// The decode of only the records a queue test keeps (the queues of every other sound record, whatever the
    /// transaction type) gives the kept records' rows of the full decode, in order, and marks them.
    fn decode_kept_both(
        buf: &[u8],
        positions: &[i64],
        crc_mode: u8,
        (columns, parsed): (&[i64], &[i8]),
        rows: &[Row],
    ) {
        let n = positions.len();
        let column = |c: header::Column, i: usize| columns[c as usize * n + i];
        let mut names: Vec<Vec<u8>> = Vec::new();
        let mut selected = Vec::new();
        let mut sound = Vec::new();
        for (i, &problem) in parsed.iter().enumerate() {
            let topic = span(
                buf,
                column(header::Column::TopicPos, i),
                column(header::Column::TopicLen, i),
            );
            let Some(topic) = topic.filter(|_| problem == 0) else {
                continue;
            };
            let decoded = String::from_utf8_lossy(topic).into_owned().into_bytes();
            let k = match names.iter().position(|t| *t == decoded) {
                Some(k) => k,
                None => {
                    names.push(decoded);
                    names.len() - 1
                }
            };
            let qid = i64::from(column(header::Column::QueueId, i) as u32);
            if sound.len() % 2 == 0 {
                selected.push((k as i64, qid));
            }
            sound.push((i, k as i64, qid));
        }
        let test = QueueTest::new(names, &selected, &[]).unwrap();
        let mut header_columns = vec![0i64; header::COLUMNS * n];
        let mut problems = vec![0i8; n];
        let mut kept = vec![7u8; n];
        let mut cols = AllCols::new(n, buf.len(), 3 * buf.len());
        let (failed, count, counts) = decode_records(
            buf,
            positions,
            &mut header_columns,
            &mut problems,
            crc_mode,
            Some((&test, &mut kept)),
            &mut cols.outputs(),
        )
        .unwrap();
        assert_eq!(header_columns, columns);
        assert_eq!(failed, problems.iter().filter(|&&p| p != 0).count());
        let expected: Vec<usize> = (0..n)
            .filter(|&i| {
                let tran = column(header::Column::Sysflag, i) & 0xC;
                problems[i] == 0
                    && (tran == 0 || tran == 8)
                    && sound
                        .iter()
                        .any(|&(j, k, q)| j == i && selected.contains(&(k, q)))
            })
            .collect();
        let marked: Vec<usize> = (0..n).filter(|&i| kept[i] == 1).collect();
        assert_eq!(marked, expected);
        assert!(kept.iter().all(|&k| k <= 1));
        assert_eq!(count, expected.len());
        assert_eq!(problems, parsed);
        let got = cols.rows(count, counts);
        for (k, &i) in expected.iter().enumerate() {
            assert_eq!(got[k], rows[i], "kept record {i}");
        }
    }

    fn text_of(value: &Option<Vec<u8>>) -> Option<String> {
        value
            .as_ref()
            .map(|v| String::from_utf8(v.clone()).unwrap())
    }

    #[test]
    fn one_pass_parses_and_decodes_hand_built_records() {
        use crate::header::tests::{encode, fields};
        let mut v2 = fields(
            0x30, // both hosts IPv6
            b"body",
            "тема/v2".as_bytes(),
            b"TAGS\x01a\x02KEYS\x01 k1  k2 \x02EMPTY\x01\x02\x01nameless\x02TAGS\x01b\x02UNIQ_KEY\x01U",
            true,
        );
        v2.phy_offset = 0x1234;
        let empty = fields(0, b"", b"T", b"", false);
        let ill_formed = fields(
            0,
            b"x",
            b"T\xFF\xC3",
            b"TAGS\x01\xE2\x82\x02KEYS\x01\xFFk",
            false,
        );
        let widest = fields(
            0x30,
            &vec![7u8; 1 << 16],
            &[b'T'; 127],
            &vec![b'p'; 32767],
            false,
        );
        let mut buf = Vec::new();
        let mut positions = Vec::new();
        for f in [&v2, &empty, &ill_formed, &widest] {
            positions.push(buf.len() as i64);
            buf.extend(encode(f));
        }
        // a BLANK tail, then a record cut short by the end of the buffer
        positions.push(buf.len() as i64);
        buf.extend(64i32.to_be_bytes());
        buf.extend(crate::layout::BLANK_MAGIC_CODE.to_be_bytes());
        buf.extend([0u8; 56]);
        positions.push(buf.len() as i64);
        buf.extend(&encode(&empty)[..60]);
        let (rows, problems) = decode_both(&buf, &positions, crate::record_crc::CHECK_PROP_CRC);
        assert_eq!(
            problems,
            [0, 0, 0, 0, header::PROBLEM_MAGIC, header::PROBLEM_TRUNCATED]
        );
        // topic, body, propertiesString, msgId, bornHost, storeHost, tags, uniqKey, the map's pairs, keys
        let texts: Vec<Option<String>> = rows[0].iter().map(text_of).collect();
        let host = "[b0b0:b0b0:b0b0:b0b0:b0b0:b0b0:b0b0:b0b0]:2964369584";
        assert_eq!(texts[0].as_deref(), Some("тема/v2"));
        assert_eq!(
            texts[3].as_deref(),
            Some("50505050505050505050505050505050505050500000000000001234")
        );
        assert_eq!(texts[4].as_deref(), Some(host));
        assert_eq!(
            (texts[6].as_deref(), texts[7].as_deref()),
            (Some("b"), Some("U"))
        );
        let rest: Vec<&str> = texts[8..].iter().map(|t| t.as_deref().unwrap()).collect();
        assert_eq!(
            rest,
            ["KEYS", " k1  k2 ", "TAGS", "b", "UNIQ_KEY", "U", "k1", "k2"]
        );
        assert_eq!(rows[1][1], Some(vec![])); // an empty body
        assert_eq!(rows[1][6..], [None, None]); // no properties: no tags, no uniqKey, no pairs, no keys
        let ill: Vec<Option<String>> = rows[2].iter().map(text_of).collect();
        assert_eq!(ill[0].as_deref(), Some("T\u{FFFD}\u{FFFD}"));
        assert_eq!(ill[6].as_deref(), Some("\u{FFFD}"));
        assert_eq!(ill.last().unwrap().as_deref(), Some("\u{FFFD}k"));
        assert_eq!(rows[3][1].as_ref().map(Vec::len), Some(1 << 16));
        assert_eq!(rows[3][2].as_ref().map(Vec::len), Some(32767));
        assert_eq!(text_of(&rows[3][4]).as_deref(), Some(host));
    }

    #[test]
    fn short_copies_copy_every_length() {
        let src: Vec<u8> = (1..=80).collect();
        for len in 0..=src.len() {
            let mut dst = vec![0u8; len];
            copy_short(&mut dst, &src[..len]);
            assert_eq!(dst, &src[..len], "length {len}");
        }
    }

    #[test]
    fn text_outgrowing_its_room_is_room_not_shape() {
        use crate::header::tests::{encode, fields};
        let buf = encode(&fields(0, b"", b"\xFF\xFF", b"", false));
        let mut header_columns = vec![0i64; header::COLUMNS];
        let mut problems = vec![0i8; 1];
        let mut cols = AllCols::new(1, buf.len(), 4); // two ill-formed bytes take six
        let result = decode_records(
            &buf,
            &[0],
            &mut header_columns,
            &mut problems,
            0,
            None,
            &mut cols.outputs(),
        );
        assert_eq!(result, Err(GatherError::Room));
        let mut cols = AllCols::new(2, buf.len(), 6);
        let result = decode_records(
            &buf,
            &[0],
            &mut header_columns,
            &mut problems,
            0,
            None,
            &mut cols.outputs(),
        );
        assert_eq!(result, Err(GatherError::Shape)); // outputs for two records, one position
        let test = QueueTest::new(Vec::new(), &[], &[]).unwrap();
        let result = decode_records(
            &buf,
            &[0],
            &mut header_columns,
            &mut problems,
            0,
            Some((&test, &mut [0u8; 2])),
            &mut AllCols::new(1, buf.len(), 6).outputs(),
        );
        assert_eq!(result, Err(GatherError::Shape)); // two marks, one position
    }

    proptest! {
        #[test]
        fn arbitrary_inputs_never_panic(
            buf in proptest::collection::vec(any::<u8>(), 0..300),
            rows in proptest::collection::vec(proptest::collection::vec(-4i64..320, 10), 0..6),
            room in 0usize..2000,
        ) {
            let n = rows.len();
            let inputs: Vec<i64> = (0..10).flat_map(|c| rows.iter().map(move |r| r[c])).collect();
            let mut cols: Vec<Col> = (0..8).map(|_| Col::new(n, room, false)).collect();
            let (mut tags, mut uniq) = (Col::new(n, room, true), Col::new(n, room, true));
            let (mut names, mut values, mut tokens) = (Col::new(room / 4, room, false), Col::new(room / 4, room, false), Col::new(room / 4, room, false));
            let (mut map_offsets, mut key_offsets) = (vec![0i32; n + 1], vec![0i32; n + 1]);
            let [topic, body, string, msg_id, born, store, ..] = &mut cols[..] else { unreachable!() };
            let mut out = Outputs {
                topic: Some(topic.out()),
                body: Some(body.out()),
                properties_string: Some(string.out()),
                properties: Some(MapOut { offsets: &mut map_offsets, names: names.out(), values: values.out() }),
                tags: Some(tags.out()),
                uniq_key: Some(uniq.out()),
                keys: Some(ListOut { offsets: &mut key_offsets, tokens: tokens.out() }),
                msg_id: Some(msg_id.out()),
                born_host: Some(born.out()),
                store_host: Some(store.out()),
            };
            let _ = decode(&buf, &inputs, &mut out);
        }

        #[test]
        fn the_fused_decode_agrees_with_the_two_passes_on_any_bytes(
            buf in proptest::collection::vec(any::<u8>(), 0..600),
            positions in proptest::collection::vec(-4i64..620, 0..8),
            mode in 0u8..8,
        ) {
            decode_both(&buf, &positions, mode);
        }

        #[test]
        fn the_fused_decode_agrees_on_encoded_records_with_damage(
            sizes in proptest::collection::vec((0usize..40, 0usize..20, 0usize..60, 0i32..4), 1..6),
            damage in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        ) {
            use crate::header::tests::{encode, fields};
            let mut buf = Vec::new();
            let mut positions = Vec::new();
            for (k, &(body, topic, props, hosts)) in sizes.iter().enumerate() {
                let properties: Vec<u8> = (0..props).map(|i| b"AB\x01\x02 "[(i * 7 + k) % 5]).collect();
                positions.push(buf.len() as i64);
                buf.extend(encode(&fields(hosts << 4, &vec![b'b'; body], &vec![b't'; topic], &properties, k % 2 == 0)));
            }
            for &(at, value) in &damage {
                if !buf.is_empty() {
                    let at = at % buf.len();
                    buf[at] = value;
                }
            }
            decode_both(&buf, &positions, 0);
        }
    }
}
