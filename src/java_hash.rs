//! Java's `String.hashCode()` over UTF-8 strings, as RocketMQ uses it for consume-queue tags codes
//! (`MessageExtBrokerInner.tagsString2tagsCode`) and index keys (`IndexFile.indexKeyHashMethod`).
//!
//! Java hashes UTF-16 code units: `h = 31 * h + unit`, wrapping at 32 bits. ASCII bytes are their own code units;
//! other characters are decoded first, and one outside the Basic Multilingual Plane counts as its two surrogates.

use crate::encode::Strings;

/// `hashCode` of `text` continued from `seed`: with `seed` the hash of a prefix, the hash of prefix + text.
#[inline]
pub fn java_hash(seed: i32, text: &[u8]) -> i32 {
    let step = |h: i32, unit: u16| h.wrapping_mul(31).wrapping_add(i32::from(unit));
    if text.is_ascii() {
        return text.iter().fold(seed, |h, &b| step(h, u16::from(b)));
    }
    // malformed UTF-8 decodes as Java's decoder does: each bad sequence becomes U+FFFD
    String::from_utf8_lossy(text)
        .encode_utf16()
        .fold(seed, step)
}

/// Why hashes could not be computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HashError {
    /// `out` (or `seeds`, when given) does not have one element per string.
    Shape,
    /// String `.0` has offsets outside the data.
    Offsets(usize),
}

/// `hashCode` of every string of `strings` into `out`, each continued from its seed (`seeds` empty: from 0).
pub fn java_hashes(strings: Strings<'_>, seeds: &[i32], out: &mut [i32]) -> Result<(), HashError> {
    let n = strings.len();
    if out.len() != n || !(seeds.is_empty() || seeds.len() == n) {
        return Err(HashError::Shape);
    }
    for (i, h) in out.iter_mut().enumerate() {
        let text = strings.get(i).ok_or(HashError::Offsets(i))?;
        *h = java_hash(seeds.get(i).copied().unwrap_or(0), text);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The definition, one UTF-16 unit at a time, for comparison.
    fn reference(text: &str) -> i32 {
        text.encode_utf16()
            .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)))
    }

    #[test]
    fn known_java_values() {
        assert_eq!(java_hash(0, b""), 0);
        assert_eq!(java_hash(0, b"TagA"), 2598919);
        assert_eq!(java_hash(0, b"hello"), 99162322);
        // "polygenelubricants".hashCode() is Integer.MIN_VALUE
        assert_eq!(java_hash(0, b"polygenelubricants"), i32::MIN);
    }

    #[test]
    fn non_ascii_hashes_utf16_units() {
        // 'é' is one unit (0xE9); '😀' (U+1F600) is two surrogates, 0xD83D 0xDE00
        assert_eq!(java_hash(0, "é".as_bytes()), 0xE9);
        assert_eq!(java_hash(0, "😀".as_bytes()), 0xD83D * 31 + 0xDE00);
        assert_eq!(java_hash(0, "é😀".as_bytes()), reference("é😀"));
        assert_eq!(java_hash(0, "键".as_bytes()), 0x952E);
    }

    #[test]
    fn a_seed_continues_a_prefix() {
        assert_eq!(
            java_hash(java_hash(0, b"Topic#"), b"key"),
            java_hash(0, b"Topic#key")
        );
    }

    #[test]
    fn column_shapes_and_offsets_are_checked() {
        let data = b"abc";
        let mut out = [0i32; 2];
        let strings = Strings {
            offsets: &[0, 1, 3],
            data,
        };
        assert_eq!(java_hashes(strings, &[], &mut out), Ok(()));
        assert_eq!(out, [java_hash(0, b"a"), java_hash(0, b"bc")]);
        assert_eq!(java_hashes(strings, &[1], &mut out), Err(HashError::Shape));
        let bad = Strings {
            offsets: &[0, 1, 9],
            data,
        };
        assert_eq!(java_hashes(bad, &[], &mut out), Err(HashError::Offsets(1)));
    }

    proptest! {
        #[test]
        fn hashes_match_the_definition(a in any::<String>(), b in any::<String>()) {
            prop_assert_eq!(java_hash(0, a.as_bytes()), reference(&a));
            let joined = format!("{a}{b}");
            prop_assert_eq!(java_hash(java_hash(0, a.as_bytes()), b.as_bytes()), reference(&joined));
        }
    }
}
