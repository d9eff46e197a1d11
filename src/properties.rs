//! Serialising message properties for whole columns (`MessageDecoder.messageProperties2String`).
//!
//! Each row's PROPERTIES text is an optional prefix (pairs serialised already, e.g. from a properties map)
//! followed, for every pair column in order whose value is present in that row, by one pair:
//!
//! | part     | bytes | content                                                  |
//! |----------|-------|----------------------------------------------------------|
//! | name     | n     | the property's name (`TAGS`, `KEYS`, `UNIQ_KEY`, …)       |
//! | U+0001   | 1     | [`NAME_VALUE_SEPARATOR`] (`MessageDecoder`)              |
//! | value    | m     | the row's value                                          |
//! | U+0002   | 1     | [`PROPERTY_SEPARATOR`] (`MessageDecoder`)                |
//!
//! A row whose value of a column is absent (null) has no pair of that column; an empty value is written.
//! The output is an Arrow string column: `rows + 1` int32 offsets and the texts end to end.

use crate::columns::{NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR};
use crate::encode::Strings;

/// One property written from a column: its name and each row's value.
#[derive(Clone, Copy, Debug)]
pub struct PairColumn<'a> {
    pub name: &'a [u8],
    pub values: Strings<'a>,
    /// One byte per row, nonzero where the row has a value; empty when every row has one.
    pub present: &'a [u8],
}

impl PairColumn<'_> {
    /// Row `i`'s value, None when the row has none; an error when its offsets lie outside the data.
    #[inline]
    fn value(&self, i: usize) -> Result<Option<&[u8]>, PropertiesError> {
        if !self.present.is_empty() && self.present[i] == 0 {
            return Ok(None);
        }
        self.values
            .get(i)
            .map(Some)
            .ok_or(PropertiesError::Offsets(i))
    }
}

/// Why properties could not be serialised.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PropertiesError {
    /// A column's length, a presence mask or the output does not match the rows.
    Shape,
    /// Row `.0` has offsets outside its column's data.
    Offsets(usize),
    /// The texts up to row `.0` exceed what int32 offsets can address.
    TooLong(usize),
}

/// The checked inputs: `rows` rows of an optional prefix and the pair columns.
fn check_shape(
    rows: usize,
    prefix: Option<Strings<'_>>,
    pairs: &[PairColumn<'_>],
) -> Result<(), PropertiesError> {
    let prefix_ok = prefix.map_or(true, |p| p.len() == rows);
    let pairs_ok = pairs
        .iter()
        .all(|c| c.values.len() == rows && (c.present.is_empty() || c.present.len() == rows));
    if prefix_ok && pairs_ok {
        Ok(())
    } else {
        Err(PropertiesError::Shape)
    }
}

/// The `rows + 1` offsets of the serialised texts into `out` (the first 0).
pub fn serialized_offsets(
    rows: usize,
    prefix: Option<Strings<'_>>,
    pairs: &[PairColumn<'_>],
    out: &mut [i32],
) -> Result<(), PropertiesError> {
    check_shape(rows, prefix, pairs)?;
    if out.len() != rows + 1 {
        return Err(PropertiesError::Shape);
    }
    out[0] = 0;
    let mut end = 0usize;
    for i in 0..rows {
        if let Some(p) = prefix {
            end += p.get(i).ok_or(PropertiesError::Offsets(i))?.len();
        }
        for column in pairs {
            if let Some(value) = column.value(i)? {
                end += column.name.len() + value.len() + 2;
            }
        }
        out[i + 1] = i32::try_from(end).map_err(|_| PropertiesError::TooLong(i))?;
    }
    Ok(())
}

/// The serialised texts into `out`, laid out by `offsets` ([`serialized_offsets`] of the same inputs).
pub fn serialize(
    rows: usize,
    prefix: Option<Strings<'_>>,
    pairs: &[PairColumn<'_>],
    offsets: &[i32],
    out: &mut [u8],
) -> Result<(), PropertiesError> {
    check_shape(rows, prefix, pairs)?;
    let total = offsets.last().map(|&e| usize::try_from(e).ok());
    if offsets.len() != rows + 1 || total != Some(Some(out.len())) {
        return Err(PropertiesError::Shape);
    }
    let mut at = 0usize;
    let mut put = |bytes: &[u8], at: &mut usize| -> Result<(), PropertiesError> {
        let dest = out
            .get_mut(*at..*at + bytes.len())
            .ok_or(PropertiesError::Shape)?;
        dest.copy_from_slice(bytes);
        *at += bytes.len();
        Ok(())
    };
    for (i, &start) in offsets[..rows].iter().enumerate() {
        if usize::try_from(start).ok() != Some(at) {
            return Err(PropertiesError::Shape);
        }
        if let Some(p) = prefix {
            put(p.get(i).ok_or(PropertiesError::Offsets(i))?, &mut at)?;
        }
        for column in pairs {
            if let Some(value) = column.value(i)? {
                put(column.name, &mut at)?;
                put(&[NAME_VALUE_SEPARATOR], &mut at)?;
                put(value, &mut at)?;
                put(&[PROPERTY_SEPARATOR], &mut at)?;
            }
        }
    }
    if at == out.len() {
        Ok(())
    } else {
        Err(PropertiesError::Shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::tests::strings;
    use proptest::prelude::*;

    /// A pair column as the tests hold it: name, values (offsets, data), presence.
    type Column<'a> = (&'a [u8], (Vec<i32>, Vec<u8>), Vec<u8>);

    /// The texts the kernels write, as one Vec per row.
    fn run(
        rows: usize,
        prefix: Option<&(Vec<i32>, Vec<u8>)>,
        columns: &[Column<'_>],
    ) -> Result<Vec<Vec<u8>>, PropertiesError> {
        let prefix = prefix.map(|(o, d)| Strings {
            offsets: o,
            data: d,
        });
        let pairs: Vec<PairColumn<'_>> = columns
            .iter()
            .map(|(name, (o, d), present)| PairColumn {
                name,
                values: Strings {
                    offsets: o,
                    data: d,
                },
                present,
            })
            .collect();
        let mut offsets = vec![0i32; rows + 1];
        serialized_offsets(rows, prefix, &pairs, &mut offsets)?;
        let mut out = vec![0u8; *offsets.last().unwrap() as usize];
        serialize(rows, prefix, &pairs, &offsets, &mut out)?;
        Ok((0..rows)
            .map(|i| out[offsets[i] as usize..offsets[i + 1] as usize].to_vec())
            .collect())
    }

    #[test]
    fn pairs_follow_the_prefix_and_absent_values_have_no_pair() {
        let prefix = strings(&[b"A\x01b\x02".to_vec(), vec![]]);
        let tags = strings(&[b"t".to_vec(), b"ignored".to_vec()]);
        let keys = strings(&[vec![], b"k1 k2".to_vec()]);
        let got = run(
            2,
            Some(&prefix),
            &[(b"TAGS", tags, vec![1, 0]), (b"KEYS", keys, vec![])],
        )
        .unwrap();
        assert_eq!(got[0], b"A\x01b\x02TAGS\x01t\x02KEYS\x01\x02".to_vec());
        assert_eq!(got[1], b"KEYS\x01k1 k2\x02".to_vec());
    }

    #[test]
    fn damaged_offsets_and_shapes_are_errors_not_panics() {
        let bad = (vec![0, 5], b"ab".to_vec());
        assert_eq!(
            run(1, None, &[(b"TAGS", bad, vec![])]),
            Err(PropertiesError::Offsets(0))
        );
        let short = strings(&[b"x".to_vec()]);
        assert_eq!(
            run(2, None, &[(b"TAGS", short, vec![])]),
            Err(PropertiesError::Shape)
        );
        let values = strings(&[b"x".to_vec()]);
        let pairs = [PairColumn {
            name: b"TAGS",
            values: Strings {
                offsets: &values.0,
                data: &values.1,
            },
            present: &[],
        }];
        let mut out = vec![0u8; 3];
        assert_eq!(
            serialize(1, None, &pairs, &[0, 3], &mut out),
            Err(PropertiesError::Shape)
        );
    }

    proptest! {
        #[test]
        fn every_row_is_its_pairs_joined(
            rows in proptest::collection::vec(
                (proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8)),
                 proptest::option::of(proptest::collection::vec(any::<u8>(), 0..8))), 0..20),
        ) {
            let n = rows.len();
            let column = |k: usize| {
                let values: Vec<Vec<u8>> = rows.iter().map(|r| (if k == 0 { &r.0 } else { &r.1 }).clone()
                    .unwrap_or_default()).collect();
                let present: Vec<u8> = rows.iter().map(|r| (if k == 0 { &r.0 } else { &r.1 }).is_some() as u8)
                    .collect();
                (strings(&values), present)
            };
            let (a, a_present) = column(0);
            let (b, b_present) = column(1);
            let got = run(n, None, &[(b"A", a, a_present), (b"BB", b, b_present)]).unwrap();
            for (i, (x, y)) in rows.iter().enumerate() {
                let mut want = Vec::new();
                for (name, value) in [(&b"A"[..], x), (&b"BB"[..], y)] {
                    if let Some(v) = value {
                        want.extend_from_slice(name);
                        want.push(NAME_VALUE_SEPARATOR);
                        want.extend_from_slice(v);
                        want.push(PROPERTY_SEPARATOR);
                    }
                }
                prop_assert_eq!(&got[i], &want);
            }
        }
    }
}
