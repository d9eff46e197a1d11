//! Writing consume-queue units (`ConsumeQueue.putMessagePositionInfo`): the 20-byte unit of each dispatched
//! record, in the layout [`crate::consume_queue`] declares (commitLogOffset 8, size 4, tagsCode 8; big-endian).

use crate::consume_queue::CQ_STORE_UNIT_SIZE;

/// Why units could not be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnitsError {
    /// The columns differ in length, or `out` is not 20 bytes per row.
    Shape,
    /// Row `.0` is not a record of the columns (negative or past their end).
    Row(usize),
}

/// The units of records `rows` into `out`, one after another: record `r` is at `phy_offsets[r]`, is `sizes[r]`
/// bytes long and has the tags code `tags_codes[r]` (a TAGS hash or a delayed message's delivery time).
pub fn put_units(
    rows: &[i64],
    phy_offsets: &[i64],
    sizes: &[i64],
    tags_codes: &[i64],
    out: &mut [u8],
) -> Result<(), UnitsError> {
    let n = phy_offsets.len();
    if sizes.len() != n
        || tags_codes.len() != n
        || Some(out.len()) != rows.len().checked_mul(CQ_STORE_UNIT_SIZE)
    {
        return Err(UnitsError::Shape);
    }
    for (k, (unit, &row)) in out
        .chunks_exact_mut(CQ_STORE_UNIT_SIZE)
        .zip(rows)
        .enumerate()
    {
        let r = usize::try_from(row)
            .ok()
            .filter(|&r| r < n)
            .ok_or(UnitsError::Row(k))?;
        unit[0..8].copy_from_slice(&phy_offsets[r].to_be_bytes());
        unit[8..12].copy_from_slice(&(sizes[r] as i32).to_be_bytes());
        unit[12..20].copy_from_slice(&tags_codes[r].to_be_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consume_queue::valid_units;
    use proptest::prelude::*;

    #[test]
    fn units_are_big_endian_in_row_order() {
        let mut out = vec![0u8; 40];
        put_units(&[1, 0], &[10, 20], &[100, 200], &[-1, 7], &mut out).unwrap();
        assert_eq!(&out[0..8], &20i64.to_be_bytes());
        assert_eq!(&out[8..12], &200i32.to_be_bytes());
        assert_eq!(&out[12..20], &7i64.to_be_bytes());
        assert_eq!(&out[20..28], &10i64.to_be_bytes());
        assert_eq!(&out[32..40], &(-1i64).to_be_bytes());
    }

    #[test]
    fn bad_rows_and_shapes_are_errors() {
        let mut out = vec![0u8; 20];
        assert_eq!(
            put_units(&[2], &[1, 2], &[1, 2], &[0, 0], &mut out),
            Err(UnitsError::Row(0))
        );
        assert_eq!(
            put_units(&[-1], &[1], &[1], &[0], &mut out),
            Err(UnitsError::Row(0))
        );
        assert_eq!(
            put_units(&[0], &[1], &[1], &[], &mut out),
            Err(UnitsError::Shape)
        );
        assert_eq!(
            put_units(&[0, 0], &[1], &[1], &[0], &mut out),
            Err(UnitsError::Shape)
        );
    }

    proptest! {
        /// Units written read back as valid units (positive sizes, non-negative offsets) with their values.
        #[test]
        fn units_read_back(records in proptest::collection::vec((0i64..1 << 50, 1i64..1 << 30, any::<i64>()), 1..40)) {
            let phy: Vec<i64> = records.iter().map(|r| r.0).collect();
            let sizes: Vec<i64> = records.iter().map(|r| r.1).collect();
            let tags: Vec<i64> = records.iter().map(|r| r.2).collect();
            let rows: Vec<i64> = (0..records.len() as i64).rev().collect();
            let mut out = vec![0u8; rows.len() * CQ_STORE_UNIT_SIZE];
            put_units(&rows, &phy, &sizes, &tags, &mut out).unwrap();
            let mut flags = vec![0u8; rows.len()];
            prop_assert_eq!(valid_units(&out, &mut flags), Some(rows.len()));
            for (unit, &r) in out.chunks_exact(CQ_STORE_UNIT_SIZE).zip(&rows) {
                let r = r as usize;
                prop_assert_eq!(i64::from_be_bytes(unit[0..8].try_into().unwrap()), phy[r]);
                prop_assert_eq!(i64::from(i32::from_be_bytes(unit[8..12].try_into().unwrap())), sizes[r]);
                prop_assert_eq!(i64::from_be_bytes(unit[12..20].try_into().unwrap()), tags[r]);
            }
        }
    }
}
