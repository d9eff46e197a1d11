//! The CRC checks of `CommitLog.checkMessageAndReturnSize`: a record's body CRC and the whole-record CRC that
//! 5.2+ brokers append as the `__CRC32#` property (`enabledAppendPropCRC`).
//!
//! Both are `UtilAll.crc32`: java.util.zip.CRC32 (zlib's polynomial) masked with 0x7FFFFFFF. The body CRC covers
//! the stored body and sits in BODYCRC; it is checked for bodies longer than 0. The property CRC covers the
//! record's bytes before its reserved last 20 bytes (`CommitLog.CRC32_RESERVED_LEN`), which end its properties:
//!
//! | offset | bytes | content                                                                            |
//! |-------:|-------|------------------------------------------------------------------------------------|
//! | 0      | 8     | `__CRC32#` ([`PROPERTY_CRC32`], `MessageConst.PROPERTY_CRC32`)                     |
//! | 8      | 1     | U+0001 (`MessageDecoder.NAME_VALUE_SEPARATOR`)                                     |
//! | 9      | 10    | the CRC's decimal digits, least significant first, `0`-padded (`createCrc32`)      |
//! | 19     | 1     | U+0002 (`MessageDecoder.PROPERTY_SEPARATOR`)                                       |

use crate::columns::{NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR};

/// `MessageConst.PROPERTY_CRC32`.
pub const PROPERTY_CRC32: &[u8; 8] = b"__CRC32#";
/// `CommitLog.CRC32_RESERVED_LEN`: the property CRC's pair at the end of the properties.
pub const CRC32_RESERVED_LEN: usize = 20;
/// The CRC's decimal digits in the reserved pair.
const CRC_DIGITS: usize = 10;

/// Check the body CRC (the broker's default, `forceVerifyPropCRC` false).
pub const CHECK_BODY_CRC: u8 = 1;
/// Check the property CRC of the records that carry one.
pub const CHECK_PROP_CRC: u8 = 2;
/// A record without the property CRC fails (`forceVerifyPropCRC`, or a store that always appends it).
pub const REQUIRE_PROP_CRC: u8 = 4;

/// `UtilAll.crc32`: CRC32 of `bytes` masked to a non-negative int.
#[inline]
pub fn masked_crc32(bytes: &[u8]) -> i64 {
    i64::from(crc32fast::hash(bytes) & 0x7FFF_FFFF)
}

/// The CRC the reserved pair `tail` (20 bytes) stores, or None when `tail` is not a `__CRC32#` pair.
pub fn stored_prop_crc(tail: &[u8]) -> Option<i64> {
    let (name, rest) = tail.split_at_checked(PROPERTY_CRC32.len())?;
    let (&separator, rest) = rest.split_first()?;
    let (digits, end) = rest.split_at_checked(CRC_DIGITS)?;
    if name != PROPERTY_CRC32
        || separator != NAME_VALUE_SEPARATOR
        || end != [PROPERTY_SEPARATOR]
        || !digits.iter().all(u8::is_ascii_digit)
    {
        return None;
    }
    Some(
        digits
            .iter()
            .rev()
            .fold(0i64, |value, &d| value * 10 + i64::from(d - b'0')),
    )
}

/// Why a sound record fails its CRC checks under `mode` (a combination of the `CHECK_*` / `REQUIRE_*` flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrcFailure {
    /// The body's CRC differs from BODYCRC.
    Body,
    /// The `__CRC32#` digits differ from the record's CRC, or the property is missing where required.
    Property,
}

/// The places a record's CRC checks read: the whole record, its body and its properties (all inside `record`'s
/// buffer, as the record checks of [`crate::header`] found them), and the stored BODYCRC.
pub struct RecordSpans<'a> {
    pub record: &'a [u8],
    pub body: &'a [u8],
    pub properties: &'a [u8],
    pub body_crc: i64,
}

/// Runs the CRC checks of `mode` on one sound record, body first (a record failing it is not checked further).
pub fn check_record(spans: &RecordSpans<'_>, mode: u8) -> Result<(), CrcFailure> {
    if mode & CHECK_BODY_CRC != 0
        && !spans.body.is_empty()
        && masked_crc32(spans.body) != spans.body_crc
    {
        return Err(CrcFailure::Body);
    }
    if mode & (CHECK_PROP_CRC | REQUIRE_PROP_CRC) == 0 {
        return Ok(());
    }
    let tail = spans
        .properties
        .len()
        .checked_sub(CRC32_RESERVED_LEN)
        .and_then(|at| spans.properties.get(at..));
    let stored = tail.and_then(stored_prop_crc);
    match stored {
        None if mode & REQUIRE_PROP_CRC != 0 => Err(CrcFailure::Property),
        None => Ok(()),
        Some(stored) => {
            let covered = spans.record.len().checked_sub(CRC32_RESERVED_LEN);
            let computed = covered
                .and_then(|c| spans.record.get(..c))
                .map(masked_crc32);
            if computed == Some(stored) {
                Ok(())
            } else {
                Err(CrcFailure::Property)
            }
        }
    }
}

/// The reserved pair for `crc` (`MessageDecoder.createCrc32`), as a broker appends it.
pub fn encode_prop_crc(crc: i64) -> [u8; CRC32_RESERVED_LEN] {
    let mut out = [0u8; CRC32_RESERVED_LEN];
    out[..8].copy_from_slice(PROPERTY_CRC32);
    out[8] = NAME_VALUE_SEPARATOR;
    let mut rest = crc;
    for d in out[9..9 + CRC_DIGITS].iter_mut() {
        *d = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    out[CRC32_RESERVED_LEN - 1] = PROPERTY_SEPARATOR;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masked_crc_is_java_crc32_without_the_sign_bit() {
        assert_eq!(masked_crc32(b""), 0);
        assert_eq!(masked_crc32(b"123456789"), 0xCBF4_3926 & 0x7FFF_FFFF);
    }

    #[test]
    fn the_reserved_pair_round_trips_and_rejects_damage() {
        for crc in [0, 7, 1_234_567_890, 0x7FFF_FFFF] {
            assert_eq!(stored_prop_crc(&encode_prop_crc(crc)), Some(crc));
        }
        let good = encode_prop_crc(42);
        assert_eq!(&good[9..19], b"2400000000");
        for at in [0, 7, 8, 12, 19] {
            let mut bad = good;
            bad[at] = b'x';
            assert_eq!(stored_prop_crc(&bad), None, "byte {at}");
        }
        assert_eq!(stored_prop_crc(&good[1..]), None);
    }

    fn record_with_prop_crc(body: &[u8]) -> (Vec<u8>, usize) {
        let mut record = b"HEAD".to_vec();
        record.extend_from_slice(body);
        record.extend_from_slice(b"K\x01v\x02");
        let crc = masked_crc32(&record);
        let props_at = 4 + body.len();
        record.extend_from_slice(&encode_prop_crc(crc));
        (record, props_at)
    }

    #[test]
    fn checks_follow_the_mode() {
        let (record, props_at) = record_with_prop_crc(b"body");
        fn spans(r: &[u8], body_crc: i64, props_at: usize) -> RecordSpans<'_> {
            RecordSpans {
                record: r,
                body: &r[4..8],
                properties: &r[props_at..],
                body_crc,
            }
        }
        let good_body = masked_crc32(b"body");
        let all = CHECK_BODY_CRC | CHECK_PROP_CRC | REQUIRE_PROP_CRC;
        let (good, wrong) = (
            spans(&record, good_body, props_at),
            spans(&record, good_body ^ 1, props_at),
        );
        assert_eq!(check_record(&good, all), Ok(()));
        assert_eq!(check_record(&wrong, all), Err(CrcFailure::Body));
        assert_eq!(check_record(&wrong, CHECK_PROP_CRC), Ok(()));
        let mut damaged = record.clone();
        damaged[1] ^= 0x40;
        assert_eq!(
            check_record(&spans(&damaged, good_body, props_at), all),
            Err(CrcFailure::Property)
        );
        assert_eq!(
            check_record(&spans(&damaged, good_body, props_at), CHECK_BODY_CRC),
            Ok(())
        );
        let plain = b"HEADbodyK\x01v\x02".to_vec();
        let no_prop = RecordSpans {
            record: &plain,
            body: &plain[4..8],
            properties: &plain[8..],
            body_crc: good_body,
        };
        assert_eq!(
            check_record(&no_prop, CHECK_BODY_CRC | CHECK_PROP_CRC),
            Ok(())
        );
        assert_eq!(check_record(&no_prop, all), Err(CrcFailure::Property));
        let empty = RecordSpans {
            record: &plain[..4],
            body: &[],
            properties: &[],
            body_crc: 12345,
        };
        assert_eq!(check_record(&empty, CHECK_BODY_CRC), Ok(())); // an empty body is not checked
    }
}
