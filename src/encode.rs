//! Encoding commit-log records (`MessageExtEncoder.encode`), a whole batch at a time, into one output buffer.
//!
//! The record layout is the one [`crate::layout`] declares. The variable parts come from Arrow string/binary
//! columns (offsets into one data buffer), the fixed fields from one `i64` column each; host addresses are 16
//! bytes per row (only the first 4 written for an IPv4 host). Records are laid end to end in row order.
//!
//! | part           | bytes                         | from                                                  |
//! |----------------|-------------------------------|-------------------------------------------------------|
//! | TOTALSIZE      | 4                             | [`record_size`] (`MessageExtEncoder.calMsgLength`)    |
//! | MAGICCODE      | 4                             | v2 when the topic is longer than [`MAX_TOPIC_LENGTH_V1`] |
//! | BODYCRC        | 4                             | CRC-32 (java.util.zip.CRC32) of the body & 0x7FFFFFFF |
//! | QUEUEID … PREPAREDTRANSACTIONOFFSET | 56, 68 or 80 | the fixed columns, hosts 8 or 20 bytes each     |
//! | BODYLEN, BODY  | 4 + n                         | the body column                                       |
//! | TOPICLEN, TOPIC | 1 (v1) or 2 (v2) + n         | the topic column                                      |
//! | PROPERTIESLEN, PROPERTIES | 2 + n              | the properties column (serialised already)            |

use crate::layout::{
    BODY_CRC_POSITION, BORNHOST_V6_FLAG, BORN_HOST_POSITION, BORN_TIMESTAMP_POSITION,
    FLAG_POSITION, IPV4_HOST_LENGTH, IPV6_HOST_LENGTH, MAGIC_CODE_POSITION, MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2, PHYSICAL_OFFSET_POSITION, QUEUE_ID_POSITION, QUEUE_OFFSET_POSITION,
    STOREHOSTADDRESS_V6_FLAG, SYSFLAG_POSITION, TOTALSIZE_POSITION,
};

/// `MessageExtEncoder`'s limit for v1 records: a topic this long or shorter has a one-byte TOPICLEN.
pub const MAX_TOPIC_LENGTH_V1: usize = 127;
/// The longest PROPERTIES a record can hold (PROPERTIESLEN is a signed short).
pub const MAX_PROPERTIES_LENGTH: usize = i16::MAX as usize;
/// The longest topic a v2 record can hold (TOPICLEN is a signed short; RocketMQ allows 255 bytes).
pub const MAX_TOPIC_LENGTH: usize = i16::MAX as usize;
/// Bytes of an address in the host columns (an IPv6 address; an IPv4 one uses the first 4).
pub const HOST_ADDRESS_WIDTH: usize = 16;
/// The bytes of a record besides its body, topic and properties and their length fields, with IPv4 hosts:
/// TOTALSIZE … PREPAREDTRANSACTIONOFFSET.
const FIXED_V4: usize = BORN_HOST_POSITION + IPV4_HOST_LENGTH + 8 + IPV4_HOST_LENGTH + 4 + 8;

/// Values of an Arrow string or binary column: `offsets` (n + 1, non-decreasing) into `data`.
#[derive(Clone, Copy, Debug)]
pub struct Strings<'a> {
    pub offsets: &'a [i32],
    pub data: &'a [u8],
}

impl<'a> Strings<'a> {
    /// The number of values (0 for malformed offsets that hold none).
    pub fn len(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i`, or None when its offsets are negative, decreasing or outside `data`.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&'a [u8]> {
        let start = usize::try_from(*self.offsets.get(i)?).ok()?;
        let end = usize::try_from(*self.offsets.get(i + 1)?).ok()?;
        self.data.get(start..end)
    }
}

/// The columns of `n` records to encode.
#[derive(Clone, Copy, Debug)]
pub struct RecordColumns<'a> {
    pub topic: Strings<'a>,
    pub body: Strings<'a>,
    pub properties: Strings<'a>,
    pub queue_id: &'a [i64],
    pub flag: &'a [i64],
    pub queue_offset: &'a [i64],
    pub phy_offset: &'a [i64],
    /// With [`BORNHOST_V6_FLAG`] / [`STOREHOSTADDRESS_V6_FLAG`] set for IPv6 hosts.
    pub sysflag: &'a [i64],
    pub born_timestamp: &'a [i64],
    /// [`HOST_ADDRESS_WIDTH`] bytes per row.
    pub born_addr: &'a [u8],
    pub born_port: &'a [i64],
    pub store_timestamp: &'a [i64],
    /// [`HOST_ADDRESS_WIDTH`] bytes per row.
    pub store_addr: &'a [u8],
    pub store_port: &'a [i64],
    pub reconsume_times: &'a [i64],
    pub prepared_offset: &'a [i64],
}

/// A row's topic, body and properties.
type RowParts<'a> = (&'a [u8], &'a [u8], &'a [u8]);

/// Why a batch could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// The columns' lengths disagree, or the output is not the records' total size.
    Shape,
    /// Row `.0` has offsets outside its column's data.
    Offsets(usize),
    /// Row `.0` does not fit a record: topic, properties or the whole record too long for its length field.
    TooLong(usize),
}

impl<'a> RecordColumns<'a> {
    /// The number of records, or [`EncodeError::Shape`] when the columns disagree.
    pub fn rows(&self) -> Result<usize, EncodeError> {
        let n = self.queue_id.len();
        let lengths = [
            self.topic.len(),
            self.body.len(),
            self.properties.len(),
            self.flag.len(),
            self.queue_offset.len(),
            self.phy_offset.len(),
            self.sysflag.len(),
            self.born_timestamp.len(),
            self.born_port.len(),
            self.store_timestamp.len(),
            self.store_port.len(),
            self.reconsume_times.len(),
            self.prepared_offset.len(),
            self.born_addr.len() / HOST_ADDRESS_WIDTH,
            self.store_addr.len() / HOST_ADDRESS_WIDTH,
        ];
        let addr_whole = self.born_addr.len() % HOST_ADDRESS_WIDTH == 0
            && self.store_addr.len() % HOST_ADDRESS_WIDTH == 0;
        if addr_whole && lengths.iter().all(|&l| l == n) {
            Ok(n)
        } else {
            Err(EncodeError::Shape)
        }
    }

    /// Row `i`'s topic, body and properties.
    fn parts(&self, i: usize) -> Result<RowParts<'a>, EncodeError> {
        let get = |s: Strings<'a>| s.get(i).ok_or(EncodeError::Offsets(i));
        Ok((get(self.topic)?, get(self.body)?, get(self.properties)?))
    }
}

/// `MessageExtEncoder.calMsgLength`: the size of a record with these field lengths.
pub fn record_size(sysflag: i64, body: usize, topic: usize, properties: usize) -> usize {
    let host = |flag: i32| {
        if sysflag & i64::from(flag) != 0 {
            IPV6_HOST_LENGTH - IPV4_HOST_LENGTH
        } else {
            0
        }
    };
    let topic_len_field = if topic > MAX_TOPIC_LENGTH_V1 { 2 } else { 1 };
    FIXED_V4
        + host(BORNHOST_V6_FLAG)
        + host(STOREHOSTADDRESS_V6_FLAG)
        + 4
        + body
        + topic_len_field
        + topic
        + 2
        + properties
}

/// Row `i`'s record size, checked against the record's length fields.
fn checked_size(cols: &RecordColumns<'_>, i: usize) -> Result<usize, EncodeError> {
    let (topic, body, properties) = cols.parts(i)?;
    let size = record_size(cols.sysflag[i], body.len(), topic.len(), properties.len());
    if topic.len() > MAX_TOPIC_LENGTH
        || properties.len() > MAX_PROPERTIES_LENGTH
        || i32::try_from(size).is_err()
    {
        return Err(EncodeError::TooLong(i));
    }
    Ok(size)
}

/// The size of every record into `out` (one per row).
pub fn record_sizes(cols: &RecordColumns<'_>, out: &mut [i64]) -> Result<(), EncodeError> {
    if cols.rows()? != out.len() {
        return Err(EncodeError::Shape);
    }
    for (i, size) in out.iter_mut().enumerate() {
        *size = checked_size(cols, i)? as i64;
    }
    Ok(())
}

/// BODYCRC as the record stores it: `UtilAll.crc32` (the one implementation in `record_crc`) as a Java int.
#[inline]
pub fn body_crc(data: &[u8]) -> i32 {
    // masked_crc32 clears the sign bit, so the value always fits an i32
    crate::record_crc::masked_crc32(data) as i32
}

/// A cursor writing big-endian fields into one record's bytes.
struct Writer<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    #[inline]
    fn put(&mut self, bytes: &[u8]) {
        self.out[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }

    #[inline]
    fn host(&mut self, addr: &[u8], port: i64, v6: bool) {
        self.put(&addr[..if v6 { 16 } else { 4 }]);
        self.put(&(port as i32).to_be_bytes());
    }
}

/// Writes row `i`'s record, `size` bytes ([`checked_size`]), into `out`.
fn encode_one(
    cols: &RecordColumns<'_>,
    i: usize,
    size: usize,
    out: &mut [u8],
) -> Result<(), EncodeError> {
    let (topic, body, properties) = cols.parts(i)?;
    let sysflag = cols.sysflag[i];
    let magic = if topic.len() > MAX_TOPIC_LENGTH_V1 {
        MESSAGE_MAGIC_CODE_V2
    } else {
        MESSAGE_MAGIC_CODE
    };
    let host = i * HOST_ADDRESS_WIDTH..(i + 1) * HOST_ADDRESS_WIDTH;
    let mut w = Writer {
        out,
        at: TOTALSIZE_POSITION,
    };
    w.put(&(size as i32).to_be_bytes());
    debug_assert_eq!(w.at, MAGIC_CODE_POSITION);
    w.put(&magic.to_be_bytes());
    debug_assert_eq!(w.at, BODY_CRC_POSITION);
    w.put(&body_crc(body).to_be_bytes());
    debug_assert_eq!(w.at, QUEUE_ID_POSITION);
    w.put(&(cols.queue_id[i] as i32).to_be_bytes());
    debug_assert_eq!(w.at, FLAG_POSITION);
    w.put(&(cols.flag[i] as i32).to_be_bytes());
    debug_assert_eq!(w.at, QUEUE_OFFSET_POSITION);
    w.put(&cols.queue_offset[i].to_be_bytes());
    debug_assert_eq!(w.at, PHYSICAL_OFFSET_POSITION);
    w.put(&cols.phy_offset[i].to_be_bytes());
    debug_assert_eq!(w.at, SYSFLAG_POSITION);
    w.put(&(sysflag as i32).to_be_bytes());
    debug_assert_eq!(w.at, BORN_TIMESTAMP_POSITION);
    w.put(&cols.born_timestamp[i].to_be_bytes());
    let born_v6 = sysflag & i64::from(BORNHOST_V6_FLAG) != 0;
    w.host(&cols.born_addr[host.clone()], cols.born_port[i], born_v6);
    w.put(&cols.store_timestamp[i].to_be_bytes());
    let store_v6 = sysflag & i64::from(STOREHOSTADDRESS_V6_FLAG) != 0;
    w.host(&cols.store_addr[host], cols.store_port[i], store_v6);
    w.put(&(cols.reconsume_times[i] as i32).to_be_bytes());
    w.put(&cols.prepared_offset[i].to_be_bytes());
    w.put(&(body.len() as i32).to_be_bytes());
    w.put(body);
    if topic.len() > MAX_TOPIC_LENGTH_V1 {
        w.put(&(topic.len() as i16).to_be_bytes());
    } else {
        w.put(&[topic.len() as u8]);
    }
    w.put(topic);
    w.put(&(properties.len() as i16).to_be_bytes());
    w.put(properties);
    debug_assert_eq!(w.at, size);
    Ok(())
}

/// Encodes every row's record into `out`, end to end in row order; `out` must be exactly the sum of the
/// records' sizes ([`record_sizes`]).
pub fn encode_records(cols: &RecordColumns<'_>, out: &mut [u8]) -> Result<(), EncodeError> {
    let n = cols.rows()?;
    let mut rest = out;
    for i in 0..n {
        let size = checked_size(cols, i)?;
        let (record, tail) = rest.split_at_mut_checked(size).ok_or(EncodeError::Shape)?;
        encode_one(cols, i, size, record)?;
        rest = tail;
    }
    if rest.is_empty() {
        Ok(())
    } else {
        Err(EncodeError::Shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::tests::strings;
    use crate::header::{parse_record, Column, PROBLEM_NONE};
    use proptest::prelude::*;

    /// One record's input, owned.
    #[derive(Clone, Debug)]
    struct Msg {
        topic: Vec<u8>,
        body: Vec<u8>,
        properties: Vec<u8>,
        ints: [i64; 11],
        born: [u8; 16],
        store: [u8; 16],
    }

    /// Owned columns of a batch, viewed as [`RecordColumns`].
    struct Batch {
        topic: (Vec<i32>, Vec<u8>),
        body: (Vec<i32>, Vec<u8>),
        properties: (Vec<i32>, Vec<u8>),
        ints: Vec<Vec<i64>>,
        born: Vec<u8>,
        store: Vec<u8>,
    }

    // ints: queue_id, flag, queue_offset, phy_offset, sysflag, born_ts, born_port, store_ts, store_port,
    // reconsume_times, prepared_offset
    fn batch(msgs: &[Msg]) -> Batch {
        let col = |f: fn(&Msg) -> &[u8]| strings(&msgs.iter().map(f).collect::<Vec<_>>());
        Batch {
            topic: col(|m| &m.topic),
            body: col(|m| &m.body),
            properties: col(|m| &m.properties),
            ints: (0..11)
                .map(|k| msgs.iter().map(|m| m.ints[k]).collect())
                .collect(),
            born: msgs.iter().flat_map(|m| m.born).collect(),
            store: msgs.iter().flat_map(|m| m.store).collect(),
        }
    }

    fn view(b: &Batch) -> RecordColumns<'_> {
        fn s(c: &(Vec<i32>, Vec<u8>)) -> Strings<'_> {
            Strings {
                offsets: &c.0,
                data: &c.1,
            }
        }
        RecordColumns {
            topic: s(&b.topic),
            body: s(&b.body),
            properties: s(&b.properties),
            queue_id: &b.ints[0],
            flag: &b.ints[1],
            queue_offset: &b.ints[2],
            phy_offset: &b.ints[3],
            sysflag: &b.ints[4],
            born_timestamp: &b.ints[5],
            born_addr: &b.born,
            born_port: &b.ints[6],
            store_timestamp: &b.ints[7],
            store_addr: &b.store,
            store_port: &b.ints[8],
            reconsume_times: &b.ints[9],
            prepared_offset: &b.ints[10],
        }
    }

    fn encode(msgs: &[Msg]) -> (Vec<u8>, Vec<i64>) {
        let b = batch(msgs);
        let cols = view(&b);
        let mut sizes = vec![0i64; msgs.len()];
        record_sizes(&cols, &mut sizes).unwrap();
        let mut out = vec![0u8; sizes.iter().sum::<i64>() as usize];
        encode_records(&cols, &mut out).unwrap();
        (out, sizes)
    }

    fn msg(topic: &[u8], body: &[u8], properties: &[u8], sysflag: i64) -> Msg {
        let mut born = [0u8; 16];
        born[..4].copy_from_slice(&[10, 0, 0, 1]);
        Msg {
            topic: topic.to_vec(),
            body: body.to_vec(),
            properties: properties.to_vec(),
            ints: [3, 0, 7, 1000, sysflag, 111, 1234, 222, 10911, 0, 0],
            born,
            store: [0xFE; 16],
        }
    }

    /// Decodes every record of `out` with the crate's parser and checks it against `msgs`.
    fn check_round_trip(msgs: &[Msg], out: &[u8], sizes: &[i64]) {
        let mut pos = 0usize;
        for (m, &size) in msgs.iter().zip(sizes) {
            let (row, problem) = parse_record(out, pos as i64);
            assert_eq!(problem, PROBLEM_NONE);
            let get = |c: Column| row[c as usize];
            assert_eq!(get(Column::TotalSize), size);
            let field = |p: Column, l: Column| &out[get(p) as usize..][..get(l) as usize];
            assert_eq!(field(Column::BodyPos, Column::BodyLen), &m.body[..]);
            assert_eq!(field(Column::TopicPos, Column::TopicLen), &m.topic[..]);
            assert_eq!(field(Column::PropsPos, Column::PropsLen), &m.properties[..]);
            assert_eq!(get(Column::BodyCrc), i64::from(body_crc(&m.body)));
            let narrow = |v: i64| i64::from(v as i32);
            assert_eq!(get(Column::QueueId), narrow(m.ints[0]));
            assert_eq!(get(Column::Flag), narrow(m.ints[1]));
            assert_eq!(get(Column::QueueOffset), m.ints[2]);
            assert_eq!(get(Column::PhyOffset), m.ints[3]);
            assert_eq!(get(Column::Sysflag), narrow(m.ints[4]));
            assert_eq!(get(Column::BornTimestamp), m.ints[5]);
            assert_eq!(get(Column::StoreTimestamp), m.ints[7]);
            assert_eq!(get(Column::ReconsumeTimes), narrow(m.ints[9]));
            assert_eq!(get(Column::PreparedOffset), m.ints[10]);
            let host = |p: Column, addr: &[u8; 16], port: i64, flag: i32| {
                let width = if m.ints[4] & i64::from(flag) != 0 {
                    16
                } else {
                    4
                };
                let at = get(p) as usize; // positions are the buffer's
                assert_eq!(&out[at..at + width], &addr[..width]);
                assert_eq!(
                    &out[at + width..at + width + 4],
                    &(port as i32).to_be_bytes()
                );
            };
            host(Column::BornHostPos, &m.born, m.ints[6], BORNHOST_V6_FLAG);
            host(
                Column::StoreHostPos,
                &m.store,
                m.ints[8],
                STOREHOSTADDRESS_V6_FLAG,
            );
            pos += size as usize;
        }
        assert_eq!(pos, out.len());
    }

    #[test]
    fn an_ipv4_record_is_byte_exact() {
        let m = msg(b"T", b"hi", b"KEYS\x01k\x02", 0);
        let (out, sizes) = encode(std::slice::from_ref(&m));
        let mut want = Vec::new();
        want.extend_from_slice(&(sizes[0] as i32).to_be_bytes());
        want.extend_from_slice(&MESSAGE_MAGIC_CODE.to_be_bytes());
        want.extend_from_slice(&body_crc(b"hi").to_be_bytes());
        want.extend_from_slice(&3i32.to_be_bytes());
        want.extend_from_slice(&0i32.to_be_bytes());
        want.extend_from_slice(&7i64.to_be_bytes());
        want.extend_from_slice(&1000i64.to_be_bytes());
        want.extend_from_slice(&0i32.to_be_bytes());
        want.extend_from_slice(&111i64.to_be_bytes());
        want.extend_from_slice(&[10, 0, 0, 1]);
        want.extend_from_slice(&1234i32.to_be_bytes());
        want.extend_from_slice(&222i64.to_be_bytes());
        want.extend_from_slice(&[0xFE; 4]);
        want.extend_from_slice(&10911i32.to_be_bytes());
        want.extend_from_slice(&0i32.to_be_bytes());
        want.extend_from_slice(&0i64.to_be_bytes());
        want.extend_from_slice(&2i32.to_be_bytes());
        want.extend_from_slice(b"hi");
        want.push(1);
        want.extend_from_slice(b"T");
        want.extend_from_slice(&7i16.to_be_bytes());
        want.extend_from_slice(b"KEYS\x01k\x02");
        assert_eq!(out, want);
        assert_eq!(sizes[0] as usize, 88 + 2 + 1 + 1 + 2 + 7);
    }

    #[test]
    fn the_body_crc_is_java_crc32_masked() {
        // java.util.zip.CRC32 of "123456789" is 0xCBF43926
        assert_eq!(body_crc(b"123456789"), 0xCBF4_3926_u32 as i32 & 0x7FFF_FFFF);
        assert_eq!(body_crc(b""), 0);
    }

    #[test]
    fn empty_body_and_properties_and_an_empty_value() {
        let msgs = [
            msg(b"T", b"", b"", 0),
            msg(b"Topic", b"x", b"A\x01\x02", 0),
            msg(b"Topic", b"", b"", BORNHOST_V6_FLAG as i64),
        ];
        let (out, sizes) = encode(&msgs);
        assert_eq!(sizes[0], 88 + 1 + 1 + 2);
        assert_eq!(sizes[2], sizes[0] + 12 + 4);
        check_round_trip(&msgs, &out, &sizes);
    }

    #[test]
    fn long_topics_make_v2_records() {
        let long = vec![b'a'; 200];
        let msgs = [msg(&long, b"b", b"", 0), msg(&long[..127], b"b", b"", 0)];
        let (out, sizes) = encode(&msgs);
        check_round_trip(&msgs, &out, &sizes);
        assert_eq!(&out[4..8], &MESSAGE_MAGIC_CODE_V2.to_be_bytes());
        let second = sizes[0] as usize;
        assert_eq!(
            &out[second + 4..second + 8],
            &MESSAGE_MAGIC_CODE.to_be_bytes()
        );
        assert_eq!(sizes[0] - sizes[1], 73 + 1);
    }

    #[test]
    fn ipv6_hosts_widen_the_header() {
        let flags = i64::from(BORNHOST_V6_FLAG | STOREHOSTADDRESS_V6_FLAG);
        let mut m = msg(b"T", b"body", b"", flags);
        m.born = *b"0123456789abcdef";
        let (out, sizes) = encode(std::slice::from_ref(&m));
        assert_eq!(sizes[0], 88 + 24 + 4 + 1 + 1 + 2);
        check_round_trip(&[m], &out, &sizes);
    }

    #[test]
    fn the_largest_properties_fit_and_one_more_byte_does_not() {
        let props = vec![b'p'; MAX_PROPERTIES_LENGTH];
        let m = msg(b"T", b"", &props, 0);
        let (out, sizes) = encode(std::slice::from_ref(&m));
        check_round_trip(&[m], &out, &sizes);
        let too_long = msg(b"T", b"", &vec![b'p'; MAX_PROPERTIES_LENGTH + 1], 0);
        let b = batch(&[msg(b"T", b"", b"", 0), too_long]);
        let mut sizes = vec![0; 2];
        assert_eq!(
            record_sizes(&view(&b), &mut sizes),
            Err(EncodeError::TooLong(1))
        );
    }

    #[test]
    fn bad_shapes_and_offsets_are_errors_not_panics() {
        let mut b = batch(&[msg(b"T", b"abc", b"", 0), msg(b"T", b"d", b"", 0)]);
        let mut out = vec![0u8; 10];
        assert_eq!(encode_records(&view(&b), &mut out), Err(EncodeError::Shape));
        let mut sizes = vec![0; 1];
        assert_eq!(record_sizes(&view(&b), &mut sizes), Err(EncodeError::Shape));
        b.body.0[1] = 100; // past the data
        let mut sizes = vec![0; 2];
        assert_eq!(
            record_sizes(&view(&b), &mut sizes),
            Err(EncodeError::Offsets(0))
        );
        b.body.0[1] = -1;
        assert_eq!(
            record_sizes(&view(&b), &mut sizes),
            Err(EncodeError::Offsets(0))
        );
        b.born.pop();
        assert_eq!(record_sizes(&view(&b), &mut sizes), Err(EncodeError::Shape));
    }

    fn arb_msg() -> impl Strategy<Value = Msg> {
        (
            prop_oneof![
                proptest::collection::vec(any::<u8>(), 0..8),
                proptest::collection::vec(any::<u8>(), 120..260)
            ],
            proptest::collection::vec(any::<u8>(), 0..300),
            proptest::collection::vec(any::<u8>(), 0..64),
            proptest::array::uniform11(any::<i64>()),
            any::<[u8; 16]>(),
            any::<[u8; 16]>(),
        )
            .prop_map(|(topic, body, properties, ints, born, store)| Msg {
                topic,
                body,
                properties,
                ints,
                born,
                store,
            })
    }

    proptest! {
        #[test]
        fn encoded_batches_decode_to_their_input(msgs in proptest::collection::vec(arb_msg(), 0..12)) {
            let (out, sizes) = encode(&msgs);
            check_round_trip(&msgs, &out, &sizes);
        }
    }
}
