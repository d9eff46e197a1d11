//! Variable-length columns as Arrow buffers: values gathered out of the record buffer into one data buffer with
//! its offsets (Arrow's `binary`/`string` layout), and single properties found in the properties strings.
//!
//! Arrow binary layout written here, for `n` rows:
//!
//! | buffer   | element  | count     | meaning                                                          |
//! |----------|----------|-----------|------------------------------------------------------------------|
//! | validity | bit      | n (bytes: n.div_ceil(8)) | bit `i % 8` of byte `i / 8` set: row `i` is not null (LSB first) |
//! | offsets  | i32      | n + 1     | row `i` is `data[offsets[i] .. offsets[i + 1]]`; offsets[0] = 0 |
//! | data     | u8       | offsets[n]| the values one after another                                     |
//!
//! A properties string (`MessageDecoder.messageProperties2String`) is `name \u0001 value \u0002` repeated;
//! `string2messageProperties` splits it on [`PROPERTY_SEPARATOR`], each pair on its first
//! [`NAME_VALUE_SEPARATOR`], keeps pairs whose name and value are both non-empty, and a repeated name keeps its
//! last value.

/// `MessageDecoder.NAME_VALUE_SEPARATOR` (U+0001).
pub const NAME_VALUE_SEPARATOR: u8 = 1;
/// `MessageDecoder.PROPERTY_SEPARATOR` (U+0002).
pub const PROPERTY_SEPARATOR: u8 = 2;

/// Why a gather failed: the row whose value does not lie inside the buffer, or outputs of the wrong sizes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GatherError {
    /// Row `i`'s value runs outside the source buffer.
    OutOfRange(usize),
    /// The outputs do not match the rows (offsets need n + 1, validity n.div_ceil(8), data the values' total).
    Shape,
    /// A data buffer is too small for the values (a caller that sized it from a bound may retry with more room).
    Room,
}

/// The bytes `buf[pos .. pos + len]`, or None when they do not lie inside `buf`.
#[inline]
pub(crate) fn span(buf: &[u8], pos: i64, len: i64) -> Option<&[u8]> {
    let start = usize::try_from(pos).ok()?;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    buf.get(start..end)
}

/// Total bytes of the rows' values (rows with a negative length are nulls and count 0), or None past i64.
pub fn gathered_len(len: &[i64]) -> Option<i64> {
    len.iter()
        .try_fold(0i64, |sum, &l| sum.checked_add(l.max(0)))
}

/// Copies each row's value `buf[pos[i] .. pos[i] + len[i]]` into `data`, one after another, writing Arrow
/// `offsets` (n + 1) and, when given, the `validity` bitmap: a row with a negative length is null (no bytes).
/// Returns the number of null rows.
pub fn gather(
    buf: &[u8],
    pos: &[i64],
    len: &[i64],
    offsets: &mut [i32],
    data: &mut [u8],
    mut validity: Option<&mut [u8]>,
) -> Result<usize, GatherError> {
    let n = pos.len();
    if len.len() != n
        || offsets.len() != n + 1
        || validity.as_ref().is_some_and(|v| v.len() != n.div_ceil(8))
    {
        return Err(GatherError::Shape);
    }
    if let Some(v) = validity.as_deref_mut() {
        v.fill(0);
    }
    let mut at = 0usize;
    let mut nulls = 0;
    if let Some(first) = offsets.first_mut() {
        *first = 0;
    }
    for (i, ((&p, &l), offset)) in pos
        .iter()
        .zip(len)
        .zip(offsets.iter_mut().skip(1))
        .enumerate()
    {
        if l < 0 {
            nulls += 1;
        } else {
            let value = span(buf, p, l).ok_or(GatherError::OutOfRange(i))?;
            let end = at.checked_add(value.len()).ok_or(GatherError::Shape)?;
            data.get_mut(at..end)
                .ok_or(GatherError::Shape)?
                .copy_from_slice(value);
            at = end;
            if let Some(bits) = validity.as_deref_mut().and_then(|v| v.get_mut(i / 8)) {
                *bits |= 1 << (i % 8);
            }
        }
        *offset = i32::try_from(at).map_err(|_| GatherError::Shape)?;
    }
    if at != data.len() {
        return Err(GatherError::Shape);
    }
    Ok(nulls)
}

/// Where `string2messageProperties(properties).get(name)` lies in `properties`: the value's start and length,
/// or None when the name has no pair with a non-empty value.
pub fn property_value(properties: &[u8], name: &[u8]) -> Option<(usize, usize)> {
    let mut pairs = Vec::new();
    kept_pairs(properties, &mut pairs);
    pair_value(properties, &pairs, name)
}

/// The value (start and length) of the pair named `name` among the [`kept_pairs`] of `properties`.
pub fn pair_value(
    properties: &[u8],
    pairs: &[(usize, usize, usize, usize)],
    name: &[u8],
) -> Option<(usize, usize)> {
    pairs
        .iter()
        .find(|&&(at, len, _, _)| properties.get(at..at + len) == Some(name))
        .map(|&(_, _, value_at, value_len)| (value_at, value_len))
}

/// For each row's properties string `buf[pos[i] .. pos[i] + len[i]]`, the place of `name`'s value (see
/// [`property_value`]) in `out_pos` / `out_len`; a row without one gets length -1. Returns the first row whose
/// properties do not lie inside `buf`, if any (its output and the later rows' are left unwritten).
pub fn property_values(
    buf: &[u8],
    pos: &[i64],
    len: &[i64],
    name: &[u8],
    out_pos: &mut [i64],
    out_len: &mut [i64],
) -> Result<(), GatherError> {
    if len.len() != pos.len() || out_pos.len() != pos.len() || out_len.len() != pos.len() {
        return Err(GatherError::Shape);
    }
    let rows = pos
        .iter()
        .zip(len)
        .zip(out_pos.iter_mut().zip(out_len.iter_mut()));
    let mut pairs = Vec::new();
    for (i, ((&p, &l), (op, ol))) in rows.enumerate() {
        let properties = span(buf, p, l).ok_or(GatherError::OutOfRange(i))?;
        kept_pairs(properties, &mut pairs);
        match pair_value(properties, &pairs, name) {
            Some((at, n)) => {
                *op = p + at as i64;
                *ol = n as i64;
            }
            None => {
                *op = 0;
                *ol = -1;
            }
        }
    }
    Ok(())
}

/// The most pairs the properties strings of `bytes` total bytes in `rows` rows can hold (a kept pair takes at
/// least 3 bytes, `k \u0001 v`, and all but a row's last a separator more).
pub fn max_property_pairs(bytes: usize, rows: usize) -> usize {
    (bytes + rows) / 4 + rows
}

/// Calls `f(position, separator)` for each [`NAME_VALUE_SEPARATOR`] and [`PROPERTY_SEPARATOR`] of `bytes`, in
/// order. Eight bytes are tested at a time (a properties string is short: a SIMD search's set-up costs more).
#[inline]
fn for_each_separator(bytes: &[u8], mut f: impl FnMut(usize, u8)) {
    const THREES: u64 = 0x0303_0303_0303_0303;
    const HIGH_BITS: u64 = 0x8080_8080_8080_8080;
    let mut words = bytes.chunks_exact(8);
    let mut base = 0usize;
    for word in &mut words {
        let x = u64::from_le_bytes(word.try_into().unwrap_or_default());
        // the high bit of every byte below 3 is set (and maybe of a byte after one: each is looked at)
        let mut below_three = x.wrapping_sub(THREES) & !x & HIGH_BITS;
        while below_three != 0 {
            let k = below_three.trailing_zeros() as usize / 8;
            let b = (x >> (8 * k)) as u8;
            if b == NAME_VALUE_SEPARATOR || b == PROPERTY_SEPARATOR {
                f(base + k, b);
            }
            below_three &= below_three - 1;
        }
        base += 8;
    }
    for (k, &b) in words.remainder().iter().enumerate() {
        if b == NAME_VALUE_SEPARATOR || b == PROPERTY_SEPARATOR {
            f(base + k, b);
        }
    }
}

/// The pairs `string2messageProperties(properties)` keeps, in the string's order, a repeated name only at its
/// last pair: (name start, name length, value start, value length) into `properties`, in `out` (cleared first).
pub fn kept_pairs(properties: &[u8], out: &mut Vec<(usize, usize, usize, usize)>) {
    out.clear();
    // one pass over both separators: a pair's name ends at the first U+0001 of its segment
    let (mut start, mut cut) = (0usize, None);
    let mut segment_end = |at: usize, cut: Option<usize>, start: usize| {
        if let Some(cut) = cut {
            let value_len = at - cut - 1;
            if cut > start && value_len > 0 {
                out.push((start, cut - start, cut + 1, value_len));
            }
        }
    };
    for_each_separator(properties, |at, separator| {
        if separator == NAME_VALUE_SEPARATOR {
            cut = cut.or(Some(at));
        } else {
            segment_end(at, cut, start);
            (start, cut) = (at + 1, None);
        }
    });
    segment_end(properties.len(), cut, start);
    // HashMap.put: a later pair of the same name replaces an earlier one's value
    let name = |&(at, len, _, _): &(usize, usize, usize, usize)| properties.get(at..at + len);
    let mut kept = 0;
    for k in 0..out.len() {
        let Some(&pair) = out.get(k) else { break };
        let later = out.get(k + 1..).unwrap_or_default();
        if !later
            .iter()
            .any(|l| l.1 == pair.1 && name(l) == name(&pair))
        {
            if let Some(slot) = out.get_mut(kept) {
                *slot = pair;
            }
            kept += 1;
        }
    }
    out.truncate(kept);
}

/// `string2messageProperties` for each row's properties string `data[pos[i] .. pos[i] + len[i]]`: the places
/// of the kept pairs' names and values, in the string's order, a repeated name only at its last pair.
///
/// `map_offsets` (n + 1) receives each row's first pair index, Arrow map style; `pairs` is four rows of
/// `capacity` each: name positions, name lengths, value positions, value lengths (`capacity` at least
/// [`max_property_pairs`]). Returns the number of pairs.
pub fn property_pairs(
    data: &[u8],
    pos: &[i64],
    len: &[i64],
    map_offsets: &mut [i32],
    pairs: &mut [i64],
) -> Result<usize, GatherError> {
    let n = pos.len();
    if len.len() != n || map_offsets.len() != n + 1 || pairs.len() % 4 != 0 {
        return Err(GatherError::Shape);
    }
    let capacity = pairs.len() / 4;
    let (names_at, rest) = pairs.split_at_mut(capacity);
    let (names_len, rest) = rest.split_at_mut(capacity);
    let (values_at, values_len) = rest.split_at_mut(capacity);
    let mut row_pairs = Vec::new();
    let mut count = 0usize;
    if let Some(first) = map_offsets.first_mut() {
        *first = 0;
    }
    for (i, ((&p, &l), offset)) in pos
        .iter()
        .zip(len)
        .zip(map_offsets.iter_mut().skip(1))
        .enumerate()
    {
        let properties = span(data, p, l).ok_or(GatherError::OutOfRange(i))?;
        let base = usize::try_from(p).map_err(|_| GatherError::OutOfRange(i))?;
        kept_pairs(properties, &mut row_pairs);
        for &(name_at, name_len, value_at, value_len) in &row_pairs {
            let (name_at, value_at) = (base + name_at, base + value_at);
            let slot = (
                names_at.get_mut(count),
                names_len.get_mut(count),
                values_at.get_mut(count),
                values_len.get_mut(count),
            );
            let (Some(na), Some(nl), Some(va), Some(vl)) = slot else {
                return Err(GatherError::Shape);
            };
            (*na, *nl, *va, *vl) = (
                name_at as i64,
                name_len as i64,
                value_at as i64,
                value_len as i64,
            );
            count += 1;
        }
        *offset = i32::try_from(count).map_err(|_| GatherError::Shape)?;
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathers_values_and_nulls_into_arrow_buffers() {
        let buf = b"..hello..world!";
        let (pos, len) = ([2i64, 0, 9, 7], [5i64, -1, 6, 0]);
        let mut offsets = [0i32; 5];
        let mut data = vec![0u8; 11];
        let mut validity = [0xFFu8; 1];
        assert_eq!(
            gather(
                buf,
                &pos,
                &len,
                &mut offsets,
                &mut data,
                Some(&mut validity)
            ),
            Ok(1)
        );
        assert_eq!(offsets, [0, 5, 5, 11, 11]);
        assert_eq!(&data, b"helloworld!");
        assert_eq!(validity, [0b1101]);
    }

    #[test]
    fn a_gather_outside_the_buffer_or_into_wrong_outputs_fails() {
        let buf = b"abcdef";
        let mut offsets = [0i32; 2];
        let mut data = vec![0u8; 4];
        assert_eq!(
            gather(buf, &[3], &[4], &mut offsets, &mut data, None),
            Err(GatherError::OutOfRange(0))
        );
        assert_eq!(
            gather(buf, &[-1], &[4], &mut offsets, &mut data, None),
            Err(GatherError::OutOfRange(0))
        );
        assert_eq!(
            gather(buf, &[0], &[3], &mut offsets, &mut data, None),
            Err(GatherError::Shape)
        );
        assert_eq!(
            gather(buf, &[0], &[5], &mut offsets, &mut data, None),
            Err(GatherError::Shape)
        );
        assert_eq!(
            gather(buf, &[0], &[4], &mut offsets[..1], &mut data, None),
            Err(GatherError::Shape)
        );
        assert_eq!(gathered_len(&[3, -1, i64::MAX]), None);
        assert_eq!(gathered_len(&[3, -1, 4]), Some(7));
    }

    #[test]
    fn properties_as_string2message_properties_reads_them() {
        let p = b"TAGS\x01a\x02KEYS\x01k1 k2\x02EMPTY\x01\x02TAGS\x01b\x02";
        let value = |name: &[u8]| property_value(p, name).map(|(at, n)| &p[at..at + n]);
        assert_eq!(value(b"TAGS"), Some(&b"b"[..])); // the last pair wins
        assert_eq!(value(b"KEYS"), Some(&b"k1 k2"[..]));
        assert_eq!(value(b"EMPTY"), None); // an empty value is dropped
        assert_eq!(value(b"TAG"), None);
        assert_eq!(value(b"k1"), None);
        assert_eq!(property_value(b"", b"TAGS"), None);
        assert_eq!(property_value(b"TAGS\x01x", b"TAGS"), Some((5, 1))); // no separator after the last pair
        assert_eq!(property_value(b"X\x01TAGS\x01v\x02", b"TAGS"), None); // inside a value
        assert_eq!(
            property_value(b"TAGS\x01TAGS\x01v\x02", b"TAGS"),
            Some((5, 6))
        ); // split on the first
    }

    #[test]
    fn property_pairs_keep_the_last_of_a_name_and_drop_empty_ones() {
        let data = b"A\x01x\x02B\x01\x02\x01y\x02A\x01z\x02noseparator\x02C\x01w";
        let rows = ([0i64, 0], [data.len() as i64, 0]);
        let cap = max_property_pairs(data.len(), 2);
        let mut offsets = [0i32; 3];
        let mut pairs = vec![0i64; 4 * cap];
        assert_eq!(
            property_pairs(data, &rows.0, &rows.1, &mut offsets, &mut pairs),
            Ok(2)
        );
        assert_eq!(offsets, [0, 2, 2]);
        let text = |k: usize, which: usize| {
            let (at, n) = (
                pairs[2 * which * cap + k] as usize,
                pairs[(2 * which + 1) * cap + k] as usize,
            );
            &data[at..at + n]
        };
        assert_eq!((text(0, 0), text(0, 1)), (&b"A"[..], &b"z"[..]));
        assert_eq!((text(1, 0), text(1, 1)), (&b"C"[..], &b"w"[..]));
        let dense = b"a\x01b\x02".repeat(5);
        let cap = max_property_pairs(dense.len() - 1, 1);
        let mut pairs = vec![0i64; 4 * cap];
        let got = property_pairs(
            &dense[..dense.len() - 1],
            &[0],
            &[dense.len() as i64 - 1],
            &mut offsets[..2],
            &mut pairs,
        );
        assert_eq!(got, Ok(1));
    }

    /// `string2messageProperties` the plain way: split on U+0002, each pair on its first U+0001, empty names
    /// and values dropped, a repeated name kept at its last pair.
    fn reference_pairs(properties: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut kept: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for segment in properties.split(|&b| b == PROPERTY_SEPARATOR) {
            let Some(cut) = segment.iter().position(|&b| b == NAME_VALUE_SEPARATOR) else {
                continue;
            };
            let (name, value) = (&segment[..cut], &segment[cut + 1..]);
            if !name.is_empty() && !value.is_empty() {
                kept.retain(|(n, _)| n != name);
                kept.push((name.to_vec(), value.to_vec()));
            }
        }
        kept
    }

    proptest::proptest! {
        #[test]
        fn kept_pairs_are_string2message_properties(
            properties in proptest::collection::vec(proptest::sample::select(b"ab\x00\x01\x02\x03\xFF".to_vec()), 0..80),
        ) {
            let mut pairs = Vec::new();
            kept_pairs(&properties, &mut pairs);
            let got: Vec<(Vec<u8>, Vec<u8>)> = pairs
                .iter()
                .map(|&(na, nl, va, vl)| (properties[na..na + nl].to_vec(), properties[va..va + vl].to_vec()))
                .collect();
            proptest::prop_assert_eq!(got, reference_pairs(&properties));
        }
    }

    #[test]
    fn separators_are_found_in_order_whatever_their_neighbours() {
        let bytes: Vec<u8> = (0..=255u8)
            .chain([1, 0, 2, 3, 1, 1, 0xFF, 2, 0, 0])
            .chain(0..40)
            .collect();
        let mut found = Vec::new();
        for_each_separator(&bytes, |at, b| found.push((at, b)));
        let expected: Vec<(usize, u8)> = bytes
            .iter()
            .enumerate()
            .filter(|(_, &b)| b == 1 || b == 2)
            .map(|(at, &b)| (at, b))
            .collect();
        assert_eq!(found, expected);
        for start in 0..9 {
            found.clear();
            for_each_separator(&bytes[start..start + 13], |at, b| found.push((at, b)));
            let within: Vec<(usize, u8)> = expected
                .iter()
                .filter(|&&(at, _)| (start..start + 13).contains(&at))
                .map(|&(at, b)| (at - start, b))
                .collect();
            assert_eq!(found, within);
        }
    }

    #[test]
    fn property_values_per_row() {
        let buf = b"TAGS\x01a\x02UNIQ_KEY\x01u\x02";
        let (mut at, mut n) = ([9i64; 3], [9i64; 3]);
        let rows = ([0i64, 7, 0], [7i64, 11, 0]);
        assert_eq!(
            property_values(buf, &rows.0, &rows.1, b"TAGS", &mut at, &mut n),
            Ok(())
        );
        assert_eq!((at, n), ([5, 0, 0], [1, -1, -1]));
        let far = property_values(buf, &[10], &[100], b"TAGS", &mut at[..1], &mut n[..1]);
        assert_eq!(far, Err(GatherError::OutOfRange(0)));
    }
}

/// Longest text of a host: `[xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx:xxxx]:4294967295`.
pub const MAX_HOST_TEXT: usize = 1 + 8 * 4 + 7 + 2 + 10;
/// Longest offsetMsgId: 28 bytes (IPv6 address, port, physical offset) in hex.
pub const MAX_MSG_ID_TEXT: usize = 56;

const HEX_LOWER: &[u8; 16] = b"0123456789abcdef";

/// Each byte's two uppercase hex digits.
static HEX_UPPER_PAIRS: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let mut table = [[0u8; 2]; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = [DIGITS[b >> 4], DIGITS[b & 0xF]];
        b += 1;
    }
    table
};

/// Each byte's decimal digits (1 to 3, left-aligned) and their count.
static DECIMAL_BYTES: [([u8; 3], u8); 256] = {
    let mut table = [([0u8; 3], 0u8); 256];
    let mut b = 0;
    while b < 256 {
        let (h, t, o) = ((b / 100) as u8, (b / 10 % 10) as u8, (b % 10) as u8);
        table[b] = if b >= 100 {
            ([b'0' + h, b'0' + t, b'0' + o], 3)
        } else if b >= 10 {
            ([b'0' + t, b'0' + o, 0], 2)
        } else {
            ([b'0' + o, 0, 0], 1)
        };
        b += 1;
    }
    table
};

/// A short text (a host or a msgId) built on the stack: at most [`SHORT_TEXT`] bytes, more is dropped.
pub struct ShortText {
    bytes: [u8; SHORT_TEXT],
    len: usize,
}

/// Room of a [`ShortText`]: the longest host or msgId.
pub const SHORT_TEXT: usize = if MAX_HOST_TEXT > MAX_MSG_ID_TEXT {
    MAX_HOST_TEXT
} else {
    MAX_MSG_ID_TEXT
};

impl Default for ShortText {
    fn default() -> Self {
        Self {
            bytes: [0; SHORT_TEXT],
            len: 0,
        }
    }
}

impl ShortText {
    /// The text written so far.
    pub fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }

    #[inline]
    fn push(&mut self, b: u8) {
        if let Some(slot) = self.bytes.get_mut(self.len) {
            *slot = b;
            self.len += 1;
        }
    }

    #[inline]
    fn extend(&mut self, bytes: &[u8]) {
        let end = (self.len + bytes.len()).min(SHORT_TEXT);
        if let (Some(room), Some(part)) = (
            self.bytes.get_mut(self.len..end),
            bytes.get(..end - self.len),
        ) {
            room.copy_from_slice(part);
            self.len = end;
        }
    }

    /// The decimal digits of `v`.
    fn decimal(&mut self, mut v: u32) {
        let mut digits = [0u8; 10]; // u32::MAX has 10 digits
        let mut used = 0;
        for d in digits.iter_mut().rev() {
            *d = b'0' + (v % 10) as u8;
            used += 1;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.extend(digits.get(digits.len() - used..).unwrap_or_default());
    }
}

/// Writes a host field (`address ‖ port`: 4 or 16 address bytes) as Java's `InetSocketAddress` prints it
/// here: `a.b.c.d:port`, or `[x:x:x:x:x:x:x:x]:port` with unpadded lowercase groups. None for another width.
pub(crate) fn host_text(host: &[u8]) -> Option<ShortText> {
    let mut out = ShortText::default();
    let (address, port) = host.split_at_checked(host.len().checked_sub(4)?)?;
    let port = u32::from_be_bytes(port.try_into().ok()?);
    match address.len() {
        4 => {
            for (k, &octet) in address.iter().enumerate() {
                if k > 0 {
                    out.push(b'.');
                }
                let (digits, count) = &DECIMAL_BYTES[usize::from(octet)];
                out.extend(digits.get(..usize::from(*count)).unwrap_or_default());
            }
        }
        16 => {
            out.push(b'[');
            for (k, group) in address.chunks_exact(2).enumerate() {
                if k > 0 {
                    out.push(b':');
                }
                let g = u16::from_be_bytes(group.try_into().ok()?);
                let digits = (16 - g.leading_zeros()).div_ceil(4).max(1);
                for shift in (0..digits).rev() {
                    out.push(HEX_LOWER[usize::from((g >> (4 * shift)) & 0xF)]);
                }
            }
            out.push(b']');
        }
        _ => return None,
    }
    out.push(b':');
    out.decimal(port);
    Some(out)
}

/// The host field at `pos` of a record with `sysflag`: 20 bytes when `v6_flag` is set, else 8.
pub(crate) fn host_at(buf: &[u8], pos: i64, sysflag: i64, v6_flag: i32) -> Option<&[u8]> {
    let width = crate::layout::host_length(sysflag as i32, v6_flag) as i64;
    span(buf, pos, width)
}

/// The 16 uppercase hex digits of a physical offset, as a msgId ends.
#[inline]
pub(crate) fn offset_hex_text(phy_offset: i64) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (pair, b) in out.chunks_exact_mut(2).zip(phy_offset.to_be_bytes()) {
        pair.copy_from_slice(&HEX_UPPER_PAIRS[usize::from(b)]);
    }
    out
}

/// `MessageDecoder.createMessageId` of a store host field (8 or 20 bytes) and a physical offset: uppercase hex,
/// and its length (the host's bytes past 20 are left out).
pub(crate) fn msg_id_text(store_host: &[u8], phy_offset: i64) -> ([u8; MAX_MSG_ID_TEXT], usize) {
    let mut out = [0u8; MAX_MSG_ID_TEXT];
    let (host_hex, offset_hex) = out.split_at_mut(MAX_MSG_ID_TEXT - 16);
    let host = store_host.get(..host_hex.len() / 2).unwrap_or(store_host);
    for (pair, &b) in host_hex.chunks_exact_mut(2).zip(host) {
        pair.copy_from_slice(&HEX_UPPER_PAIRS[usize::from(b)]);
    }
    offset_hex.copy_from_slice(&offset_hex_text(phy_offset));
    // the offset's digits follow the host's
    let len = 2 * host.len() + 16;
    out.copy_within(MAX_MSG_ID_TEXT - 16.., 2 * host.len());
    (out, len)
}

#[cfg(test)]
mod text_tests {
    use super::*;

    fn text_of(host: &[u8]) -> String {
        let out = host_text(host).unwrap();
        assert!(out.as_bytes().len() <= MAX_HOST_TEXT);
        String::from_utf8(out.as_bytes().to_vec()).unwrap()
    }

    #[test]
    fn hosts_print_as_java_prints_them() {
        assert_eq!(
            text_of(&[10, 0, 0, 255, 0, 0, 0x2A, 0x6F]),
            "10.0.0.255:10863"
        );
        assert_eq!(text_of(&[0, 9, 99, 100, 0, 0, 0, 0]), "0.9.99.100:0");
        let mut v6 = vec![
            0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a, 0, 1,
        ];
        v6.extend(u32::MAX.to_be_bytes());
        assert_eq!(text_of(&v6), "[2001:db8:0:0:0:0:a:1]:4294967295");
        let widest = [0xFFu8; 20];
        assert_eq!(text_of(&widest).len(), MAX_HOST_TEXT);
        assert!(host_text(&[1, 2, 3]).is_none());
        assert!(host_text(&[1, 2, 3, 4, 5, 6, 7, 8, 9]).is_none());
    }

    #[test]
    fn every_octet_prints_in_decimal() {
        for octet in 0..=255u8 {
            let text = text_of(&[octet, 0, 0, 1, 0, 0, 0, 7]);
            assert_eq!(text, format!("{octet}.0.0.1:7"));
        }
    }

    #[test]
    fn msg_ids_are_upper_hex_of_store_host_and_offset() {
        let (out, len) = msg_id_text(&[127, 0, 0, 1, 0, 0, 0x2A, 0x9F], 0x1234);
        assert_eq!(&out[..len], b"7F00000100002A9F0000000000001234");
        let (out, len) = msg_id_text(&[0xAB; 20], -1);
        assert_eq!(len, MAX_MSG_ID_TEXT);
        assert_eq!(
            &out[..len],
            ["AB".repeat(20), "F".repeat(16)].concat().as_bytes()
        );
        let (out, len) = msg_id_text(&[1, 2], 0x0102_0304_0506_0708);
        assert_eq!(&out[..len], b"01020102030405060708");
    }
}
