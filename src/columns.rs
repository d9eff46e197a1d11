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

/// The pairs `string2messageProperties(properties)` keeps, in the string's order, a repeated name only at its
/// last pair: (name start, name length, value start, value length) into `properties`, in `out` (cleared first).
pub fn kept_pairs(properties: &[u8], out: &mut Vec<(usize, usize, usize, usize)>) {
    out.clear();
    let mut start = 0usize;
    let ends = memchr::memchr_iter(PROPERTY_SEPARATOR, properties).chain([properties.len()]);
    for end in ends {
        let segment = properties.get(start..end).unwrap_or_default();
        if let Some(cut) = memchr::memchr(NAME_VALUE_SEPARATOR, segment) {
            let value_len = segment.len() - cut - 1;
            if cut > 0 && value_len > 0 {
                out.push((start, cut, start + cut + 1, value_len));
            }
        }
        start = end + 1;
    }
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

/// `MessageDecoder.createMessageId` of a store host field and a physical offset: uppercase hex.
pub(crate) fn msg_id_text(store_host: &[u8], phy_offset: i64) -> ShortText {
    let mut out = ShortText::default();
    for &b in store_host.iter().chain(&phy_offset.to_be_bytes()) {
        out.extend(&HEX_UPPER_PAIRS[usize::from(b)]);
    }
    out
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
        let out = msg_id_text(&[127, 0, 0, 1, 0, 0, 0x2A, 0x9F], 0x1234);
        assert_eq!(out.as_bytes(), b"7F00000100002A9F0000000000001234");
        let out = msg_id_text(&[0xAB; 20], -1);
        assert_eq!(out.as_bytes().len(), MAX_MSG_ID_TEXT);
        assert!(out.as_bytes().ends_with(b"FFFFFFFFFFFFFFFF"));
    }
}
