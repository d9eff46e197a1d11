//! Byte layout of a RocketMQ 5.3.3 commit-log record, declared once for every kernel of the crate.
//!
//! Everything on disk is big-endian (Java `ByteBuffer`). The record, as `MessageExtEncoder.encode` writes it and
//! `CommitLog.checkMessageAndReturnSize` reads it back:
//!
//! | offset | bytes   | field                                                                  |
//! |-------:|---------|------------------------------------------------------------------------|
//! | 0      | 4       | TOTALSIZE: the whole record, this field included                       |
//! | 4      | 4       | MAGICCODE: [`MESSAGE_MAGIC_CODE`] (v1) or [`MESSAGE_MAGIC_CODE_V2`]     |
//! | 8      | 4       | BODYCRC: CRC32 of the stored body masked with 0x7FFFFFFF               |
//! | 12     | 4       | QUEUEID                                                                |
//! | 16     | 4       | FLAG                                                                   |
//! | 20     | 8       | QUEUEOFFSET                                                            |
//! | 28     | 8       | PHYSICALOFFSET: absolute commit-log offset of the record               |
//! | 36     | 4       | SYSFLAG                                                                |
//! | 40     | 8       | BORNTIMESTAMP (ms)                                                     |
//! | 48     | 8 or 20 | BORNHOST: 4- or 16-byte address + 4-byte port ([`BORNHOST_V6_FLAG`])   |
//! | ..     | 8       | STORETIMESTAMP (ms)                                                    |
//! | ..     | 8 or 20 | STOREHOST ([`STOREHOSTADDRESS_V6_FLAG`])                               |
//! | ..     | 4       | RECONSUMETIMES                                                         |
//! | ..     | 8       | PREPAREDTRANSACTIONOFFSET                                              |
//! | ..     | 4 + n   | BODYLEN (signed int), BODY                                             |
//! | ..     | 1/2 + n | TOPICLEN (v1: signed byte, v2: signed short), TOPIC (UTF-8)            |
//! | ..     | 2 + n   | PROPERTIESLEN (signed short), PROPERTIES (UTF-8)                       |
//!
//! The BLANK end-of-file marker (`CommitLog.doAppend`) is 8 bytes: TOTALSIZE = the bytes left in the file, then
//! [`BLANK_MAGIC_CODE`]; the rest of the file is not written.

/// `MessageDecoder.MESSAGE_MAGIC_CODE` (0xDAA320A7): v1 records, 1-byte topic length.
pub const MESSAGE_MAGIC_CODE: i32 = 0xDAA3_20A7_u32 as i32;
/// `MessageDecoder.MESSAGE_MAGIC_CODE_V2` (0xDAA320AB): v2 records, 2-byte topic length.
pub const MESSAGE_MAGIC_CODE_V2: i32 = 0xDAA3_20AB_u32 as i32;
/// `CommitLog.BLANK_MAGIC_CODE` (0xCBD43194): the end-of-file filler.
pub const BLANK_MAGIC_CODE: i32 = 0xCBD4_3194_u32 as i32;
/// `CommitLog.END_FILE_MIN_BLANK_LENGTH`: the BLANK marker's bytes (TOTALSIZE and MAGICCODE).
pub const END_FILE_MIN_BLANK_LENGTH: usize = 8;

/// `MessageSysFlag.BORNHOST_V6_FLAG`: BORNHOST holds a 16-byte address.
pub const BORNHOST_V6_FLAG: i32 = 0x10;
/// `MessageSysFlag.STOREHOSTADDRESS_V6_FLAG`: STOREHOST holds a 16-byte address.
pub const STOREHOSTADDRESS_V6_FLAG: i32 = 0x20;

pub const TOTALSIZE_POSITION: usize = 0;
/// `MessageDecoder.MESSAGE_MAGIC_CODE_POSITION`
pub const MAGIC_CODE_POSITION: usize = 4;
pub const BODY_CRC_POSITION: usize = 8;
pub const QUEUE_ID_POSITION: usize = 12;
/// `MessageDecoder.MESSAGE_FLAG_POSITION`
pub const FLAG_POSITION: usize = 16;
/// `MessageDecoder.QUEUE_OFFSET_POSITION`
pub const QUEUE_OFFSET_POSITION: usize = 20;
/// `MessageDecoder.MESSAGE_PHYSIC_OFFSET_POSITION`
pub const PHYSICAL_OFFSET_POSITION: usize = 28;
/// `MessageDecoder.SYSFLAG_POSITION`
pub const SYSFLAG_POSITION: usize = 36;
/// `MessageDecoder.BORN_TIMESTAMP_POSITION`
pub const BORN_TIMESTAMP_POSITION: usize = 40;
pub const BORN_HOST_POSITION: usize = 48;
/// A host field with an IPv4 address: 4-byte address + 4-byte port.
pub const IPV4_HOST_LENGTH: usize = 8;
/// A host field with an IPv6 address: 16-byte address + 4-byte port.
pub const IPV6_HOST_LENGTH: usize = 20;
/// The fields up to BORNTIMESTAMP, whose positions do not depend on the hosts' widths.
pub const FIXED_PREFIX: usize = BORN_HOST_POSITION;

/// Whether `magic` is one of the two record magic codes.
#[inline]
pub fn is_message_magic(magic: i32) -> bool {
    magic == MESSAGE_MAGIC_CODE || magic == MESSAGE_MAGIC_CODE_V2
}

/// Width of a host field for a record whose sysflag has `v6_flag` set or not.
#[inline]
pub fn host_length(sysflag: i32, v6_flag: i32) -> usize {
    if sysflag & v6_flag != 0 {
        IPV6_HOST_LENGTH
    } else {
        IPV4_HOST_LENGTH
    }
}

/// The `N` bytes at `at`, or None when they do not lie inside `buf`.
#[inline]
fn bytes_at<const N: usize>(buf: &[u8], at: usize) -> Option<[u8; N]> {
    buf.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// The signed byte at `at` (v1 TOPICLEN), or None outside `buf`.
#[inline]
pub fn be_i8(buf: &[u8], at: usize) -> Option<i8> {
    bytes_at::<1>(buf, at).map(i8::from_be_bytes)
}

/// The big-endian i16 at `at`, or None when it does not lie inside `buf`.
#[inline]
pub fn be_i16(buf: &[u8], at: usize) -> Option<i16> {
    bytes_at::<2>(buf, at).map(i16::from_be_bytes)
}

/// The big-endian i32 at `at`, or None when it does not lie inside `buf`.
#[inline]
pub fn be_i32(buf: &[u8], at: usize) -> Option<i32> {
    bytes_at::<4>(buf, at).map(i32::from_be_bytes)
}

/// The big-endian i64 at `at`, or None when it does not lie inside `buf`.
#[inline]
pub fn be_i64(buf: &[u8], at: usize) -> Option<i64> {
    bytes_at::<8>(buf, at).map(i64::from_be_bytes)
}

/// Records a kernel reads ahead of the one it decodes: their first cache lines are loaded together.
pub const READ_AHEAD: usize = 32;

/// Loads the cache lines at `places` (those inside `buf`) in one go, so that their memory reads overlap instead of
/// waiting one after another: records lie a kilobyte or more apart, too far for the CPU's own prefetching.
#[inline]
pub fn load_lines(buf: &[u8], places: impl Iterator<Item = i64>) {
    let mut sum = 0u8;
    for at in places {
        if let Some(&b) = usize::try_from(at).ok().and_then(|a| buf.get(a)) {
            sum ^= b;
        }
    }
    std::hint::black_box(sum);
}

/// The start and TOTALSIZE of the record at `at`, when its size field lies inside `buf` and is positive.
#[inline]
fn record_at(buf: &[u8], at: i64) -> Option<(usize, usize)> {
    let start = usize::try_from(at).ok()?;
    let total = be_i32(buf, start).and_then(|t| usize::try_from(t).ok())?;
    (total > 0).then_some((start, total))
}

/// Loads the last cache lines of the records at `places` (their topic and properties, [`TAIL_LINES`] lines before
/// each record's end, its TOTALSIZE read from `buf`): a record's fields after the body lie a body's length past
/// its start, where the CPU's own prefetching does not reach before they are read. The first line of each record
/// should be loaded already (TOTALSIZE is read from it); records of a non-positive size, or ending past `buf`, are
/// left alone. Returns the lines loaded.
#[inline]
pub fn load_tails(buf: &[u8], places: impl Iterator<Item = i64>) -> usize {
    let (mut sum, mut loaded) = (0u8, 0usize);
    for at in places {
        let Some((start, total)) = record_at(buf, at) else {
            continue;
        };
        let end = start.saturating_add(total);
        if end > buf.len() {
            continue;
        }
        for line in 1..=TAIL_LINES {
            if let Some(&b) = end
                .checked_sub(64 * line - 63)
                .and_then(|a| buf.get(a.max(start)))
            {
                sum ^= b;
                loaded += 1;
            }
        }
    }
    std::hint::black_box(sum);
    loaded
}

/// Loads every cache line of the records at `places`, up to [`WHOLE_RECORD_LINES`] lines each (their TOTALSIZE
/// read from `buf`): a decode that copies the records' bodies then finds them in the cache instead of waiting for
/// each line in turn (a body is a run of lines the CPU's own prefetching only follows once it has started). Records
/// of a non-positive size are left alone; a record ending past `buf` is loaded up to its end. Returns the lines
/// loaded.
#[inline]
pub fn load_records(buf: &[u8], places: impl Iterator<Item = i64>) -> usize {
    let mut loaded = 0usize;
    for at in places {
        let Some((_, total)) = record_at(buf, at) else {
            continue;
        };
        loaded += load_span(buf, at, i64::try_from(total).unwrap_or(i64::MAX));
    }
    loaded
}

/// Loads the cache lines of the `len` bytes at `at` (up to [`WHOLE_RECORD_LINES`] lines, those inside `buf`).
/// Returns the lines loaded; a negative place or length loads none.
#[inline]
pub fn load_span(buf: &[u8], at: i64, len: i64) -> usize {
    let (Ok(start), Ok(len)) = (usize::try_from(at), usize::try_from(len)) else {
        return 0;
    };
    load_between(
        buf,
        start,
        start.saturating_add(len.min(64 * WHOLE_RECORD_LINES)),
    )
}

/// Loads the cache lines of `buf[start..end]` (clipped to `buf`), a line every 64 bytes from `start`. Returns the
/// lines loaded.
#[inline]
pub fn load_between(buf: &[u8], start: usize, end: usize) -> usize {
    let end = end.min(buf.len());
    let (mut sum, mut loaded, mut line) = (0u8, 0usize, start);
    while line < end {
        if let Some(&b) = buf.get(line) {
            sum ^= b;
            loaded += 1;
        }
        line += 64;
    }
    std::hint::black_box(sum);
    loaded
}

/// The most lines [`load_records`] loads of one record (a longer body streams through the CPU's own prefetching).
pub const WHOLE_RECORD_LINES: usize = 64;

/// Lines [`load_tails`] loads at a record's end: its topic and a typical properties string.
pub const TAIL_LINES: usize = 2;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn tails_of_any_size_field_stay_inside_the_buffer() {
        // TOTALSIZE fields: a record, zero, negative, past the buffer, i32::MAX, and a start too close to the end
        let mut buf = vec![0u8; 4096];
        for (at, total) in [
            (0usize, 300i32),
            (512, 0),
            (1024, -5),
            (2048, 1 << 20),
            (3072, i32::MAX),
        ] {
            buf[at..at + 4].copy_from_slice(&total.to_be_bytes());
        }
        let places = [0, 512, 1024, 2048, 3072, 4094, 4096, -1, i64::MAX, i64::MIN];
        // only the sound record's two last lines
        assert_eq!(load_tails(&buf, places.iter().copied()), TAIL_LINES);
        assert_eq!(load_tails(&[], places.iter().copied()), 0);
        // a record shorter than a line: its last byte's line only
        buf[0..4].copy_from_slice(&10i32.to_be_bytes());
        assert_eq!(load_tails(&buf, [0].into_iter()), 1);
    }

    #[test]
    fn whole_records_are_loaded_up_to_their_size_the_cap_and_the_buffer() {
        let mut buf = vec![0u8; 16384];
        // 300 bytes: lines at 0, 64, .., 256; a record longer than the cap; one past the buffer; bad sizes
        buf[0..4].copy_from_slice(&300i32.to_be_bytes());
        assert_eq!(load_records(&buf, [0].into_iter()), 5);
        buf[1024..1028].copy_from_slice(&(1i32 << 20).to_be_bytes());
        assert_eq!(load_records(&buf, [1024].into_iter()), WHOLE_RECORD_LINES);
        buf[16000..16004].copy_from_slice(&4096i32.to_be_bytes());
        assert_eq!(load_records(&buf, [16000].into_iter()), 6); // 16000..16384: 384 bytes
        buf[8192..8196].copy_from_slice(&0i32.to_be_bytes());
        buf[9000..9004].copy_from_slice(&(-7i32).to_be_bytes());
        let none = [8192, 9000, 16382, 16384, -1, i64::MAX, i64::MIN];
        assert_eq!(load_records(&buf, none.into_iter()), 0);
        assert_eq!(load_records(&[], [0, 1].into_iter()), 0);
    }

    #[test]
    fn spans_are_loaded_inside_the_buffer_up_to_the_cap() {
        let buf = vec![0u8; 8192];
        assert_eq!(load_span(&buf, 0, 1), 1);
        assert_eq!(load_span(&buf, 10, 128), 2); // 10 and 74: the loop steps from the start
        assert_eq!(load_span(&buf, 8000, 1000), 3); // 8000, 8064, 8128
        assert_eq!(load_span(&buf, 0, i64::MAX), WHOLE_RECORD_LINES);
        for (at, len) in [
            (0, 0),
            (-1, 10),
            (10, -1),
            (8192, 64),
            (i64::MAX, 64),
            (i64::MIN, 1),
        ] {
            assert_eq!(load_span(&buf, at, len), 0);
        }
    }

    proptest! {
        #[test]
        fn whole_records_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..4096),
                                     places in proptest::collection::vec(any::<i64>(), 0..16)) {
            prop_assert!(load_records(&buf, places.iter().copied()) <= WHOLE_RECORD_LINES * places.len());
            for &p in &places {
                prop_assert!(load_span(&buf, p, p.wrapping_mul(31)) <= WHOLE_RECORD_LINES);
            }
            let inside: Vec<i64> = places.iter().map(|p| p.rem_euclid(buf.len().max(1) as i64)).collect();
            prop_assert!(load_records(&buf, inside.into_iter()) <= WHOLE_RECORD_LINES * places.len());
        }

        #[test]
        fn tails_never_panic(buf in proptest::collection::vec(any::<u8>(), 0..512),
                             places in proptest::collection::vec(any::<i64>(), 0..16)) {
            prop_assert!(load_tails(&buf, places.iter().copied()) <= TAIL_LINES * places.len());
            let inside: Vec<i64> = places.iter().map(|p| p.rem_euclid(buf.len().max(1) as i64)).collect();
            prop_assert!(load_tails(&buf, inside.into_iter()) <= TAIL_LINES * places.len());
        }
    }
}
