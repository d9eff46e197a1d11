//! Header columns of a batch of records: the fixed fields and the places of the variable ones, with RocketMQ's
//! record checks (`CommitLog.checkMessageAndReturnSize`), one record at a time into preallocated columns.

use crate::layout::{
    be_i16, be_i32, be_i64, be_i8, host_length, is_message_magic, load_lines, load_tails,
    BODY_CRC_POSITION, BORNHOST_V6_FLAG, BORN_HOST_POSITION, BORN_TIMESTAMP_POSITION, FIXED_PREFIX,
    FLAG_POSITION, IPV4_HOST_LENGTH, MAGIC_CODE_POSITION, MESSAGE_MAGIC_CODE_V2,
    PHYSICAL_OFFSET_POSITION, QUEUE_ID_POSITION, QUEUE_OFFSET_POSITION, READ_AHEAD,
    STOREHOSTADDRESS_V6_FLAG, SYSFLAG_POSITION, TOTALSIZE_POSITION,
};
use crate::record_crc;

/// Why a record failed its checks (0: it passed); the first failing check wins.
pub const PROBLEM_NONE: i8 = 0;
/// MAGICCODE is neither record magic code.
pub const PROBLEM_MAGIC: i8 = 1;
/// A field runs past the end of the buffer.
pub const PROBLEM_TRUNCATED: i8 = 2;
/// TOTALSIZE is not positive, or BODYLEN, TOPICLEN or PROPERTIESLEN is negative.
pub const PROBLEM_NEGATIVE_LENGTH: i8 = 3;
/// TOTALSIZE differs from the length the field lengths imply (`MessageExtEncoder.calMsgLength`).
pub const PROBLEM_LENGTH_MISMATCH: i8 = 4;
/// The body's CRC32 differs from BODYCRC (with [`crate::record_crc::CHECK_BODY_CRC`]).
pub const PROBLEM_CRC: i8 = 5;
/// The record's CRC32 differs from its `__CRC32#` property, or a required one is missing.
pub const PROBLEM_PROP_CRC: i8 = 6;

/// The output columns, one row of a `COLUMNS × n` matrix each (all i64), in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Column {
    TotalSize,
    Magic,
    BodyCrc,
    QueueId,
    Flag,
    QueueOffset,
    PhyOffset,
    Sysflag,
    BornTimestamp,
    BornHostPos,
    StoreTimestamp,
    StoreHostPos,
    ReconsumeTimes,
    PreparedOffset,
    BodyPos,
    BodyLen,
    TopicPos,
    TopicLen,
    PropsPos,
    PropsLen,
}

/// Number of [`Column`]s.
pub const COLUMNS: usize = Column::PropsLen as usize + 1;

/// Column names as the Python side calls them, in [`Column`] order.
pub const COLUMN_NAMES: [&str; COLUMNS] = [
    "total_size",
    "magic",
    "body_crc",
    "queue_id",
    "flag",
    "queue_offset",
    "phy_offset",
    "sysflag",
    "born_timestamp",
    "born_host_pos",
    "store_timestamp",
    "store_host_pos",
    "reconsume_times",
    "prepared_offset",
    "body_pos",
    "body_len",
    "topic_pos",
    "topic_len",
    "props_pos",
    "props_len",
];

/// Where the host-dependent fields sit when both hosts are IPv4; each IPv6 host before a field moves it by 12.
const STORE_TIMESTAMP_V4: usize = BORN_HOST_POSITION + IPV4_HOST_LENGTH;
const RECONSUME_TIMES_V4: usize = STORE_TIMESTAMP_V4 + 8 + IPV4_HOST_LENGTH;
const PREPARED_OFFSET_V4: usize = RECONSUME_TIMES_V4 + 4;
const BODY_LEN_V4: usize = PREPARED_OFFSET_V4 + 8;

/// One record's fields in [`Column`] order, and its problem code.
pub type Row = ([i64; COLUMNS], i8);

/// Parses the record starting at `pos`; never reads outside `buf`.
///
/// A record that fails a check gets a problem code; the place and length columns (hosts, body, topic,
/// properties) are then zero, and so is every fixed field not read before the failing check. TOTALSIZE and
/// MAGICCODE are read whenever the first 48 bytes of the record lie inside `buf`.
pub fn parse_record(buf: &[u8], pos: i64) -> Row {
    let mut row = [0i64; COLUMNS];
    let mut problem = PROBLEM_NONE;
    let size = i64::try_from(buf.len()).unwrap_or(i64::MAX);
    let fail = |problem: &mut i8, code: i8| {
        if *problem == PROBLEM_NONE {
            *problem = code;
        }
    };
    // an offset from the record's start, as a buffer index (None: before the buffer or past usize)
    let at = |offset: i64| usize::try_from(pos.checked_add(offset)?).ok();
    let Some(start) = usize::try_from(pos)
        .ok()
        .filter(|p| p.checked_add(FIXED_PREFIX).is_some_and(|e| e <= buf.len()))
    else {
        return (row, PROBLEM_TRUNCATED);
    };
    // inside the buffer: the fixed prefix is
    let read4 = |offset: usize| i64::from(be_i32(buf, start + offset).unwrap_or(0));
    let read8 = |offset: usize| be_i64(buf, start + offset).unwrap_or(0);
    let total = read4(TOTALSIZE_POSITION);
    let magic = read4(MAGIC_CODE_POSITION);
    row[Column::TotalSize as usize] = total;
    row[Column::Magic as usize] = magic;
    if !is_message_magic(magic as i32) {
        fail(&mut problem, PROBLEM_MAGIC);
    }
    if total <= 0 {
        fail(&mut problem, PROBLEM_NEGATIVE_LENGTH);
    }
    if total > size - pos {
        fail(&mut problem, PROBLEM_TRUNCATED);
    }
    if problem != PROBLEM_NONE {
        return (row, problem);
    }
    row[Column::BodyCrc as usize] = read4(BODY_CRC_POSITION);
    row[Column::QueueId as usize] = read4(QUEUE_ID_POSITION);
    row[Column::Flag as usize] = read4(FLAG_POSITION);
    row[Column::QueueOffset as usize] = read8(QUEUE_OFFSET_POSITION);
    row[Column::PhyOffset as usize] = read8(PHYSICAL_OFFSET_POSITION);
    let sysflag = read4(SYSFLAG_POSITION) as i32;
    row[Column::Sysflag as usize] = i64::from(sysflag);
    row[Column::BornTimestamp as usize] = read8(BORN_TIMESTAMP_POSITION);

    let born_len = host_length(sysflag, BORNHOST_V6_FLAG);
    let store_len = host_length(sysflag, STOREHOSTADDRESS_V6_FLAG);
    let born_shift = born_len - IPV4_HOST_LENGTH;
    let both_shift = born_shift + store_len - IPV4_HOST_LENGTH;
    // the fields after the born host, each read while the record is sound and the field lies inside the buffer
    let host_dependent = [
        (Column::StoreTimestamp, STORE_TIMESTAMP_V4 + born_shift, 8),
        (Column::ReconsumeTimes, RECONSUME_TIMES_V4 + both_shift, 4),
        (Column::PreparedOffset, PREPARED_OFFSET_V4 + both_shift, 8),
        (Column::BodyLen, BODY_LEN_V4 + both_shift, 4),
    ];
    for (column, offset, width) in host_dependent {
        let value = if width == 8 {
            be_i64(buf, start + offset)
        } else {
            be_i32(buf, start + offset).map(i64::from)
        };
        match value {
            Some(v) => row[column as usize] = v,
            None => return (zero_places(row), PROBLEM_TRUNCATED),
        }
    }
    let body_len = row[Column::BodyLen as usize];
    if body_len < 0 {
        return (zero_places(row), PROBLEM_NEGATIVE_LENGTH);
    }
    let born_host_pos = pos + BORN_HOST_POSITION as i64;
    let store_host_pos = born_host_pos + born_len as i64 + 8;
    let body_pos = store_host_pos + store_len as i64 + 12 + 4;
    let topic_len_pos = body_pos + body_len;
    let v2 = magic as i32 == MESSAGE_MAGIC_CODE_V2;
    let topic_len_width: i64 = if v2 { 2 } else { 1 };
    let topic_len = at(topic_len_pos - pos).and_then(|p| {
        if v2 {
            be_i16(buf, p).map(i64::from)
        } else {
            be_i8(buf, p).map(i64::from)
        }
    });
    let Some(topic_len) = topic_len else {
        return (zero_places(row), PROBLEM_TRUNCATED);
    };
    if topic_len < 0 {
        return (zero_places(row), PROBLEM_NEGATIVE_LENGTH);
    }
    let topic_pos = topic_len_pos + topic_len_width;
    let props_len_pos = topic_pos + topic_len;
    let Some(props_len) = at(props_len_pos - pos)
        .and_then(|p| be_i16(buf, p))
        .map(i64::from)
    else {
        return (zero_places(row), PROBLEM_TRUNCATED);
    };
    if props_len < 0 {
        return (zero_places(row), PROBLEM_NEGATIVE_LENGTH);
    }
    let props_pos = props_len_pos + 2;
    if props_pos + props_len > size {
        return (zero_places(row), PROBLEM_TRUNCATED);
    }
    if props_pos + props_len != pos + total {
        return (zero_places(row), PROBLEM_LENGTH_MISMATCH);
    }
    row[Column::BornHostPos as usize] = born_host_pos;
    row[Column::StoreHostPos as usize] = store_host_pos;
    row[Column::BodyPos as usize] = body_pos;
    row[Column::TopicPos as usize] = topic_pos;
    row[Column::TopicLen as usize] = topic_len;
    row[Column::PropsPos as usize] = props_pos;
    row[Column::PropsLen as usize] = props_len;
    (row, PROBLEM_NONE)
}

/// A failed record's row: the fixed fields read so far, no places or lengths of variable fields.
fn zero_places(mut row: [i64; COLUMNS]) -> [i64; COLUMNS] {
    for column in [
        Column::BornHostPos,
        Column::StoreHostPos,
        Column::BodyPos,
        Column::BodyLen,
        Column::TopicPos,
        Column::TopicLen,
        Column::PropsPos,
        Column::PropsLen,
    ] {
        row[column as usize] = 0;
    }
    row
}

/// Parses the records starting at `positions` into `columns` (row-major `COLUMNS × n`, see [`Column`]) and
/// `problems` (`n`), running the CRC checks of `crc_mode` (flags of [`crate::record_crc`]; 0: none) on every
/// record that passed the others. Returns the number of records that failed a check, or None when an output's
/// length does not match `positions`.
pub fn parse_records(
    buf: &[u8],
    positions: &[i64],
    columns: &mut [i64],
    problems: &mut [i8],
    crc_mode: u8,
) -> Option<usize> {
    let n = positions.len();
    if COLUMNS.checked_mul(n) != Some(columns.len()) || problems.len() != n {
        return None;
    }
    let mut failed = 0;
    for (i, (&pos, problem)) in positions.iter().zip(problems.iter_mut()).enumerate() {
        if i % READ_AHEAD == 0 {
            let ahead = positions.get(i + READ_AHEAD..).unwrap_or_default().iter();
            load_lines(buf, ahead.take(READ_AHEAD).flat_map(|&p| [p, p + 64]));
            // the records loaded one step ago: their ends (topic and properties) after their bodies
            let now = positions.get(i..).unwrap_or_default().iter();
            load_tails(buf, now.take(READ_AHEAD).copied());
        }
        let (row, code) = parse_checked(buf, pos, crc_mode);
        store_row(columns, n, i, &row);
        *problem = code;
        failed += usize::from(code != PROBLEM_NONE);
    }
    Some(failed)
}

/// [`parse_record`], then the CRC checks of `crc_mode` when the record passed the others.
#[inline]
pub(crate) fn parse_checked(buf: &[u8], pos: i64, crc_mode: u8) -> Row {
    let (row, mut code) = parse_record(buf, pos);
    if code == PROBLEM_NONE && crc_mode != 0 {
        code = crc_problem(buf, pos, &row, crc_mode);
    }
    (row, code)
}

/// Writes record `i`'s `row` into `columns` (row-major `COLUMNS × n`); cells outside `columns` are skipped.
#[inline]
pub(crate) fn store_row(columns: &mut [i64], n: usize, i: usize, row: &[i64; COLUMNS]) {
    for (c, &value) in row.iter().enumerate() {
        // in range when c < COLUMNS, i < n and columns holds COLUMNS × n
        if let Some(cell) = columns.get_mut(c * n + i) {
            *cell = value;
        }
    }
}

/// The CRC checks' problem code of a sound record at `pos` (its parsed `row` places every field inside `buf`).
fn crc_problem(buf: &[u8], pos: i64, row: &[i64; COLUMNS], mode: u8) -> i8 {
    let part = |at: i64, len: i64| -> &[u8] {
        let start = usize::try_from(at).unwrap_or(usize::MAX);
        let end = start.saturating_add(usize::try_from(len).unwrap_or(0));
        buf.get(start..end).unwrap_or_default()
    };
    let spans = record_crc::RecordSpans {
        record: part(pos, row[Column::TotalSize as usize]),
        body: part(row[Column::BodyPos as usize], row[Column::BodyLen as usize]),
        properties: part(
            row[Column::PropsPos as usize],
            row[Column::PropsLen as usize],
        ),
        body_crc: row[Column::BodyCrc as usize],
    };
    match record_crc::check_record(&spans, mode) {
        Ok(()) => PROBLEM_NONE,
        Err(record_crc::CrcFailure::Body) => PROBLEM_CRC,
        Err(record_crc::CrcFailure::Property) => PROBLEM_PROP_CRC,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::layout::{BLANK_MAGIC_CODE, IPV6_HOST_LENGTH, MESSAGE_MAGIC_CODE};
    use proptest::prelude::*;

    /// A column's values as Arrow lays them out: offsets and the values back to back (shared by the kernels'
    /// tests).
    pub(crate) fn strings<V: AsRef<[u8]>>(values: &[V]) -> (Vec<i32>, Vec<u8>) {
        let mut offsets = vec![0i32];
        let mut data = Vec::new();
        for v in values {
            data.extend_from_slice(v.as_ref());
            offsets.push(data.len() as i32);
        }
        (offsets, data)
    }

    /// The fields of one record, for a test encoder that writes them the way `MessageExtEncoder.encode` does.
    #[derive(Clone, Debug)]
    pub(crate) struct Fields {
        pub(crate) v2: bool,
        pub(crate) sysflag: i32,
        pub(crate) queue_id: i32,
        pub(crate) flag: i32,
        pub(crate) queue_offset: i64,
        pub(crate) phy_offset: i64,
        pub(crate) born_timestamp: i64,
        pub(crate) store_timestamp: i64,
        pub(crate) reconsume: i32,
        pub(crate) prepared: i64,
        pub(crate) body: Vec<u8>,
        pub(crate) topic: Vec<u8>,
        pub(crate) properties: Vec<u8>,
    }

    pub(crate) fn fields(
        sysflag: i32,
        body: &[u8],
        topic: &[u8],
        properties: &[u8],
        v2: bool,
    ) -> Fields {
        Fields {
            v2,
            sysflag,
            queue_id: 3,
            flag: 7,
            queue_offset: 11,
            phy_offset: 1 << 33,
            born_timestamp: 1_700_000_000_000,
            store_timestamp: 1_700_000_000_123,
            reconsume: 2,
            prepared: 0,
            body: body.to_vec(),
            topic: topic.to_vec(),
            properties: properties.to_vec(),
        }
    }

    pub(crate) fn encode(f: &Fields) -> Vec<u8> {
        let born = host_length(f.sysflag, BORNHOST_V6_FLAG);
        let store = host_length(f.sysflag, STOREHOSTADDRESS_V6_FLAG);
        let topic_width = if f.v2 { 2 } else { 1 };
        let total = 4
            + 4
            + 4
            + 4
            + 4
            + 8
            + 8
            + 4
            + 8
            + born
            + 8
            + store
            + 4
            + 8
            + 4
            + f.body.len()
            + topic_width
            + f.topic.len()
            + 2
            + f.properties.len();
        let mut r = Vec::with_capacity(total);
        r.extend((total as i32).to_be_bytes());
        let magic = if f.v2 {
            MESSAGE_MAGIC_CODE_V2
        } else {
            MESSAGE_MAGIC_CODE
        };
        r.extend(magic.to_be_bytes());
        r.extend(0x1234_5678_i32.to_be_bytes());
        r.extend(f.queue_id.to_be_bytes());
        r.extend(f.flag.to_be_bytes());
        r.extend(f.queue_offset.to_be_bytes());
        r.extend(f.phy_offset.to_be_bytes());
        r.extend(f.sysflag.to_be_bytes());
        r.extend(f.born_timestamp.to_be_bytes());
        r.extend(vec![0xB0; born]);
        r.extend(f.store_timestamp.to_be_bytes());
        r.extend(vec![0x50; store]);
        r.extend(f.reconsume.to_be_bytes());
        r.extend(f.prepared.to_be_bytes());
        r.extend((f.body.len() as i32).to_be_bytes());
        r.extend(&f.body);
        if f.v2 {
            r.extend((f.topic.len() as i16).to_be_bytes());
        } else {
            r.push(f.topic.len() as u8);
        }
        r.extend(&f.topic);
        r.extend((f.properties.len() as i16).to_be_bytes());
        r.extend(&f.properties);
        assert_eq!(r.len(), total);
        r
    }

    fn col(row: &[i64; COLUMNS], c: Column) -> i64 {
        row[c as usize]
    }

    /// The variable fields a parsed row points at.
    fn slices<'a>(buf: &'a [u8], row: &[i64; COLUMNS]) -> (&'a [u8], &'a [u8], &'a [u8]) {
        let at = |p: Column, l: i64| &buf[col(row, p) as usize..(col(row, p) + l) as usize];
        (
            at(Column::BodyPos, col(row, Column::BodyLen)),
            at(Column::TopicPos, col(row, Column::TopicLen)),
            at(Column::PropsPos, col(row, Column::PropsLen)),
        )
    }

    fn check_round_trip(f: &Fields, lead: usize) {
        let mut buf = vec![0u8; lead];
        buf.extend(encode(f));
        let (row, problem) = parse_record(&buf, lead as i64);
        assert_eq!(problem, PROBLEM_NONE);
        assert_eq!(col(&row, Column::TotalSize) as usize, buf.len() - lead);
        assert_eq!(col(&row, Column::Sysflag), i64::from(f.sysflag));
        assert_eq!(col(&row, Column::QueueId), i64::from(f.queue_id));
        assert_eq!(col(&row, Column::Flag), i64::from(f.flag));
        assert_eq!(col(&row, Column::QueueOffset), f.queue_offset);
        assert_eq!(col(&row, Column::PhyOffset), f.phy_offset);
        assert_eq!(col(&row, Column::BornTimestamp), f.born_timestamp);
        assert_eq!(col(&row, Column::StoreTimestamp), f.store_timestamp);
        assert_eq!(col(&row, Column::ReconsumeTimes), i64::from(f.reconsume));
        assert_eq!(col(&row, Column::PreparedOffset), f.prepared);
        assert_eq!(col(&row, Column::BodyCrc), 0x1234_5678);
        let born = host_length(f.sysflag, BORNHOST_V6_FLAG) as i64;
        assert_eq!(col(&row, Column::BornHostPos), lead as i64 + 48);
        assert_eq!(col(&row, Column::StoreHostPos), lead as i64 + 48 + born + 8);
        let (body, topic, properties) = slices(&buf, &row);
        assert_eq!(
            (body, topic, properties),
            (&f.body[..], &f.topic[..], &f.properties[..])
        );
    }

    #[test]
    fn hand_built_records_round_trip() {
        let long_topic = vec![b'%'; 255];
        let props = b"TAGS\x01a\x02KEYS\x01k1 k2\x02EMPTY\x01\x02".to_vec();
        for sysflag in [
            0,
            BORNHOST_V6_FLAG,
            STOREHOSTADDRESS_V6_FLAG,
            BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG,
        ] {
            check_round_trip(&fields(sysflag, b"hello", b"T", &props, false), 0);
            check_round_trip(&fields(sysflag, b"", b"T", b"", false), 5); // empty body and properties
            check_round_trip(&fields(sysflag, b"x", &long_topic, &props, true), 0); // a v2 topic of 255 bytes
            check_round_trip(
                &fields(sysflag, &[7; 4096], &[b't'; 127], &vec![b'p'; 32767], false),
                3,
            );
        }
    }

    #[test]
    fn a_batch_writes_rows_into_columns_and_counts_failures() {
        let mut buf = encode(&fields(0, b"abc", b"T", b"", false));
        let second = buf.len() as i64;
        buf.extend(encode(&fields(
            IPV6_HOST_LENGTH as i32,
            b"",
            b"TT",
            b"k\x01v\x02",
            true,
        )));
        let positions = [0, second, 1];
        let mut columns = vec![-1i64; COLUMNS * 3];
        let mut problems = vec![-1i8; 3];
        assert_eq!(
            parse_records(&buf, &positions, &mut columns, &mut problems, 0),
            Some(1)
        );
        assert_eq!(problems, vec![PROBLEM_NONE, PROBLEM_NONE, PROBLEM_MAGIC]);
        for (i, &pos) in positions.iter().enumerate() {
            let (row, _) = parse_record(&buf, pos);
            let got: Vec<i64> = (0..COLUMNS).map(|c| columns[c * 3 + i]).collect();
            assert_eq!(got, row.to_vec());
        }
        assert_eq!(
            parse_records(&buf, &positions, &mut columns[1..], &mut problems, 0),
            None
        );
    }

    #[test]
    fn damaged_records_get_the_first_failing_check() {
        let good = encode(&fields(
            BORNHOST_V6_FLAG,
            b"body",
            b"Topic",
            b"k\x01v\x02",
            false,
        ));
        let total = good.len();
        let with = |at: usize, bytes: &[u8]| {
            let mut b = good.clone();
            b[at..at + bytes.len()].copy_from_slice(bytes);
            b
        };
        let problem = |buf: &[u8]| parse_record(buf, 0).1;
        assert_eq!(
            problem(&with(4, &BLANK_MAGIC_CODE.to_be_bytes())),
            PROBLEM_MAGIC
        );
        assert_eq!(
            problem(&with(0, &0i32.to_be_bytes())),
            PROBLEM_NEGATIVE_LENGTH
        );
        assert_eq!(
            problem(&with(0, &(total as i32 + 1).to_be_bytes())),
            PROBLEM_TRUNCATED
        );
        assert_eq!(
            problem(&with(0, &(total as i32 - 1).to_be_bytes())),
            PROBLEM_LENGTH_MISMATCH
        );
        let body_len_at = BODY_LEN_V4 + IPV6_HOST_LENGTH - IPV4_HOST_LENGTH;
        assert_eq!(
            problem(&with(body_len_at, &(-1i32).to_be_bytes())),
            PROBLEM_NEGATIVE_LENGTH
        );
        assert_eq!(
            problem(&with(body_len_at, &1000i32.to_be_bytes())),
            PROBLEM_TRUNCATED
        );
        assert_eq!(
            problem(&with(body_len_at + 4 + 4, &[0x80])),
            PROBLEM_NEGATIVE_LENGTH
        ); // topic length -128
        assert_eq!(
            problem(&with(total - 2 - 4, &[0xFF, 0xFF])),
            PROBLEM_NEGATIVE_LENGTH
        ); // properties length -1
           // a sysflag claiming IPv6 hosts moves every later field: the lengths no longer add up
        assert_ne!(
            problem(&with(SYSFLAG_POSITION, &0x30i32.to_be_bytes())),
            PROBLEM_NONE
        );
        // every prefix of the record is truncated, and the fields of a truncated record are zero or read in range
        for n in 0..total {
            let (row, code) = parse_record(&good[..n], 0);
            assert_eq!(code, PROBLEM_TRUNCATED, "prefix of {n} bytes");
            assert_eq!(col(&row, Column::BodyPos), 0);
            assert_eq!(col(&row, Column::PropsLen), 0);
        }
        assert_eq!(parse_record(&good, -1).1, PROBLEM_TRUNCATED);
        assert_eq!(parse_record(&good, i64::MAX).1, PROBLEM_TRUNCATED);
    }

    fn any_fields() -> impl Strategy<Value = Fields> {
        (
            any::<bool>(),
            0i32..0x800,
            (any::<i32>(), any::<i32>(), any::<i64>(), any::<i64>()),
            (any::<i64>(), any::<i64>(), any::<i32>(), any::<i64>()),
            proptest::collection::vec(any::<u8>(), 0..300),
            proptest::collection::vec(any::<u8>(), 0..128),
            proptest::collection::vec(any::<u8>(), 0..300),
        )
            .prop_map(
                |(
                    v2,
                    sysflag,
                    (queue_id, flag, queue_offset, phy_offset),
                    times,
                    body,
                    topic,
                    properties,
                )| {
                    let (born_timestamp, store_timestamp, reconsume, prepared) = times;
                    Fields {
                        v2,
                        sysflag,
                        queue_id,
                        flag,
                        queue_offset,
                        phy_offset,
                        born_timestamp,
                        store_timestamp,
                        reconsume,
                        prepared,
                        body,
                        topic,
                        properties,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn encoded_records_parse_back(f in any_fields(), lead in 0usize..16) {
            check_round_trip(&f, lead);
        }

        #[test]
        fn arbitrary_bytes_never_panic_and_stay_in_range(
            buf in proptest::collection::vec(any::<u8>(), 0..400),
            positions in proptest::collection::vec(-8i64..420, 0..8),
            mode in 0u8..8,
        ) {
            let mut columns = vec![0i64; COLUMNS * positions.len()];
            let mut problems = vec![0i8; positions.len()];
            parse_records(&buf, &positions, &mut columns, &mut problems, mode);
            for (i, &code) in problems.iter().enumerate() {
                if code == PROBLEM_NONE {
                    let (row, _) = parse_record(&buf, positions[i]);
                    let _ = slices(&buf, &row); // every place points inside the buffer
                }
            }
        }
    }
}
