//! Scans of consume-queue units: which units recovery keeps, and which pass a tag filter.
//!
//! A consume-queue unit (`ConsumeQueue.CQ_STORE_UNIT_SIZE`, 20 bytes, big-endian):
//!
//! | offset | bytes | field                                                                   |
//! |-------:|------:|-------------------------------------------------------------------------|
//! | 0      | 8     | commitLogOffset: where the record starts in the commit log              |
//! | 8      | 4     | size: the record's TOTALSIZE                                            |
//! | 12     | 8     | tagsCode: the TAGS hash (an int widened to long), a delivery time, or a |
//! |        |       | ConsumeQueueExt address (at most [`EXT_ADDRESS_MAX`])                  |

/// `ConsumeQueue.CQ_STORE_UNIT_SIZE`
pub const CQ_STORE_UNIT_SIZE: usize = 20;
const SIZE_POSITION: usize = 8;
const TAGS_CODE_POSITION: usize = 12;
/// The largest ConsumeQueueExt address (`ConsumeQueueExt.MAX_ADDR`, `Integer.MIN_VALUE - 1`): a tagsCode at
/// or below it is no tag hash.
pub const EXT_ADDRESS_MAX: i64 = i32::MIN as i64 - 1;

/// The units of `units` (whole 20-byte units, or None when its length is not a multiple of 20).
fn each_unit(units: &[u8]) -> Option<std::slice::ChunksExact<'_, u8>> {
    (units.len() % CQ_STORE_UNIT_SIZE == 0).then(|| units.chunks_exact(CQ_STORE_UNIT_SIZE))
}

/// `ConsumeQueue.recover`'s test per unit (`offset >= 0 && size > 0`) into `out` (1 kept, 0 not). Returns the
/// number kept, or None when `units` is not `out.len()` whole units.
pub fn valid_units(units: &[u8], out: &mut [u8]) -> Option<usize> {
    if units.len() != out.len().checked_mul(CQ_STORE_UNIT_SIZE)? {
        return None;
    }
    let mut kept = 0;
    for (unit, flag) in each_unit(units)?.zip(out.iter_mut()) {
        let phy = crate::layout::be_i64(unit, 0)?;
        let size = crate::layout::be_i32(unit, SIZE_POSITION)?;
        let ok = phy >= 0 && size > 0;
        *flag = u8::from(ok);
        kept += usize::from(ok);
    }
    Some(kept)
}

/// The consume queue's tag test per unit into `out` (1 passes): `(int) tagsCode` is one of `codes`, or the
/// tagsCode is a ConsumeQueueExt address (decided later on the real tag). Returns the number passing, or None
/// when `units` is not `out.len()` whole units.
pub fn units_matching_tags(units: &[u8], codes: &[i32], out: &mut [u8]) -> Option<usize> {
    if units.len() != out.len().checked_mul(CQ_STORE_UNIT_SIZE)? {
        return None;
    }
    let mut passing = 0;
    for (unit, flag) in each_unit(units)?.zip(out.iter_mut()) {
        let tags_code = crate::layout::be_i64(unit, TAGS_CODE_POSITION)?;
        let hit = codes.contains(&(tags_code as i32)) || tags_code <= EXT_ADDRESS_MAX;
        *flag = u8::from(hit);
        passing += usize::from(hit);
    }
    Some(passing)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(phy: i64, size: i32, tags_code: i64) -> Vec<u8> {
        [
            &phy.to_be_bytes()[..],
            &size.to_be_bytes(),
            &tags_code.to_be_bytes(),
        ]
        .concat()
    }

    #[test]
    fn recovery_keeps_units_with_an_offset_and_a_size() {
        let units = [
            unit(0, 100, 0),
            unit(-1, 100, 0),
            unit(5, 0, 0),
            unit(0, 0, 0),
            unit(1 << 40, i32::MAX, 9),
        ]
        .concat();
        let mut out = [9u8; 5];
        assert_eq!(valid_units(&units, &mut out), Some(2));
        assert_eq!(out, [1, 0, 0, 0, 1]);
        assert_eq!(valid_units(&units[1..], &mut out), None);
        assert_eq!(valid_units(&units, &mut out[..4]), None);
    }

    #[test]
    fn tags_match_on_the_low_int_or_an_ext_address() {
        let units = [
            unit(0, 1, 42),
            unit(0, 1, (1 << 32) | 42), // not a sign-extended int, but its low half is 42
            unit(0, 1, -7),
            unit(0, 1, EXT_ADDRESS_MAX),
            unit(0, 1, i64::from(i32::MIN)),
            unit(0, 1, 0),
        ]
        .concat();
        let mut out = [9u8; 6];
        assert_eq!(units_matching_tags(&units, &[42, -7], &mut out), Some(4));
        assert_eq!(out, [1, 1, 1, 1, 0, 0]);
        assert_eq!(units_matching_tags(&units, &[], &mut out), Some(1));
        assert_eq!(units_matching_tags(&[], &[1], &mut []), Some(0));
    }
}
