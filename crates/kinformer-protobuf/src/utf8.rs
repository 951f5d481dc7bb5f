//! Strings out of protobuf bytes, checked as UTF-8 with a fast path for ASCII.
//!
//! A pod carries about a hundred strings, most of them a few dozen bytes of ASCII. The
//! standard library's check walks such a short string a byte at a time, and it was about a
//! tenth of the time of a protobuf decode; the ASCII check reads it a word at a time. Anything
//! that is not ASCII gets the standard check, so the answer is always the standard one.

/// `bytes` as a string, or `None` when they are not UTF-8, as [`std::str::from_utf8`] decides.
#[inline]
pub(crate) fn text(bytes: &[u8]) -> Option<&str> {
    if bytes.is_ascii() {
        // SAFETY: `is_ascii` has checked that every byte is below 0x80. Each such byte is a
        // complete one-byte UTF-8 sequence, so the slice is valid UTF-8, which is all that
        // `from_utf8_unchecked` requires. The tests below compare this function with
        // `std::str::from_utf8` on ASCII, other UTF-8, and bytes that are not UTF-8.
        #[allow(unsafe_code)]
        let text = unsafe { std::str::from_utf8_unchecked(bytes) };
        Some(text)
    } else {
        std::str::from_utf8(bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::text;

    #[test]
    fn answers_as_the_standard_check() {
        assert_eq!(text(b""), Some(""));
        assert_eq!(
            text(b"kube-controller-manager"),
            Some("kube-controller-manager")
        );
        assert_eq!(text("naïve ✓".as_bytes()), Some("naïve ✓"));
        // A byte of 0x80 or more at every position of strings around a word's length: the
        // fast path must see it wherever it is.
        for len in 1..40 {
            for at in 0..len {
                let mut bytes = vec![b'a'; len];
                bytes[at] = 0xff;
                assert_eq!(text(&bytes), None, "0xff at {at} of {len}");
                bytes[at] = 0x7f;
                assert!(text(&bytes).is_some());
            }
        }
        // A sequence cut short, and an overlong encoding.
        assert_eq!(text(&[b'a', 0xe2, 0x9c]), None);
        assert_eq!(text(&[0xc0, 0xaf]), None);
    }

    proptest! {
        #[test]
        fn agrees_with_std_on_any_bytes(
            bytes in prop::collection::vec(prop_oneof![0u8..0x80, any::<u8>()], 0..80),
        ) {
            prop_assert_eq!(text(&bytes), std::str::from_utf8(&bytes).ok());
        }

        #[test]
        fn agrees_with_std_on_any_string(s in "\\PC{0,40}") {
            prop_assert_eq!(text(s.as_bytes()), Some(s.as_str()));
        }
    }
}
