//! Filling in what only the publisher knows in records already encoded (`CommitLog.DefaultAppendMessageCallback`
//! writes these fields as it appends): the queue offset at [`QUEUE_OFFSET_POSITION`], optionally the physical
//! offset at [`PHYSICAL_OFFSET_POSITION`], and the store time at its record's own position (56 with an IPv4 born
//! host, 68 with an IPv6 one); every field a big-endian long.

use crate::layout::{PHYSICAL_OFFSET_POSITION, QUEUE_OFFSET_POSITION};

/// Why records could not be patched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchError {
    /// The columns differ in length (physical offsets: empty, or one per record).
    Shape,
    /// Record `.0` would be patched outside the buffer (its start or store-time position out of bounds).
    Row(usize),
}

const LONG: usize = 8;

/// Patches the records starting at byte `starts[k]` of `buf`: queue offset `queue_offsets[k]`, physical offset
/// `phy_offsets[k]` (left as it is when `phy_offsets` is empty) and store time `store_timestamps[k]` at
/// `ts_positions[k]` inside the record. One pass over the records: their fields share cache lines.
pub fn patch_records(
    buf: &mut [u8],
    starts: &[i64],
    queue_offsets: &[i64],
    phy_offsets: &[i64],
    ts_positions: &[i64],
    store_timestamps: &[i64],
) -> Result<(), PatchError> {
    let n = starts.len();
    if queue_offsets.len() != n
        || ts_positions.len() != n
        || store_timestamps.len() != n
        || !(phy_offsets.is_empty() || phy_offsets.len() == n)
    {
        return Err(PatchError::Shape);
    }
    let len = buf.len();
    for k in 0..n {
        let field = |rel: usize| -> Result<usize, PatchError> {
            usize::try_from(starts[k])
                .ok()
                .and_then(|s| s.checked_add(rel))
                .filter(|&at| at.checked_add(LONG).is_some_and(|end| end <= len))
                .ok_or(PatchError::Row(k))
        };
        let ts_rel = usize::try_from(ts_positions[k]).map_err(|_| PatchError::Row(k))?;
        let (q, t) = (field(QUEUE_OFFSET_POSITION)?, field(ts_rel)?);
        let p = if phy_offsets.is_empty() {
            None
        } else {
            Some(field(PHYSICAL_OFFSET_POSITION)?)
        };
        buf[q..q + LONG].copy_from_slice(&queue_offsets[k].to_be_bytes());
        if let Some(p) = p {
            buf[p..p + LONG].copy_from_slice(&phy_offsets[k].to_be_bytes());
        }
        buf[t..t + LONG].copy_from_slice(&store_timestamps[k].to_be_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn long_at(buf: &[u8], at: usize) -> i64 {
        i64::from_be_bytes(buf[at..at + LONG].try_into().unwrap())
    }

    #[test]
    fn fields_are_big_endian_at_their_positions() {
        let mut buf = vec![0u8; 200];
        patch_records(
            &mut buf,
            &[0, 100],
            &[7, -1],
            &[1000, 2000],
            &[56, 68],
            &[11, 12],
        )
        .unwrap();
        assert_eq!(long_at(&buf, QUEUE_OFFSET_POSITION), 7);
        assert_eq!(long_at(&buf, PHYSICAL_OFFSET_POSITION), 1000);
        assert_eq!(long_at(&buf, 56), 11);
        assert_eq!(long_at(&buf, 100 + QUEUE_OFFSET_POSITION), -1);
        assert_eq!(long_at(&buf, 100 + PHYSICAL_OFFSET_POSITION), 2000);
        assert_eq!(long_at(&buf, 168), 12);
    }

    #[test]
    fn empty_physical_offsets_leave_them() {
        let mut buf = vec![0xAAu8; 80];
        patch_records(&mut buf, &[0], &[1], &[], &[56], &[2]).unwrap();
        assert!(
            buf[PHYSICAL_OFFSET_POSITION..PHYSICAL_OFFSET_POSITION + LONG]
                .iter()
                .all(|&b| b == 0xAA)
        );
    }

    #[test]
    fn out_of_bounds_records_are_refused() {
        let mut buf = vec![0u8; 64];
        assert_eq!(
            patch_records(&mut buf, &[0, 10], &[0, 0], &[], &[56, 56], &[0, 0]),
            Err(PatchError::Row(1))
        );
        assert_eq!(
            patch_records(&mut buf, &[-1], &[0], &[], &[56], &[0]),
            Err(PatchError::Row(0))
        );
        assert_eq!(
            patch_records(&mut buf, &[0], &[0], &[], &[-56], &[0]),
            Err(PatchError::Row(0))
        );
        assert_eq!(
            patch_records(&mut buf, &[0], &[0, 1], &[], &[56], &[0]),
            Err(PatchError::Shape)
        );
    }

    proptest! {
        #[test]
        fn never_panics(len in 0usize..300, starts in prop::collection::vec(-10i64..400, 0..8),
                        ts in prop::collection::vec(-10i64..100, 8), with_phy: bool) {
            let mut buf = vec![0u8; len];
            let n = starts.len();
            let phy = if with_phy { vec![5i64; n] } else { vec![] };
            let _ = patch_records(&mut buf, &starts, &vec![1; n], &phy, &ts[..n], &vec![2; n]);
        }
    }
}
