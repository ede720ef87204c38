//! JavaScript's string semantics, where Mastra's scorers depend on them: lengths in UTF-16
//! code units, and the whitespace of `\s` and `trim()`.

/// Whether `c` is whitespace to a JavaScript regular expression's `\s` (and `trim()`):
/// the ASCII spaces, NBSP, the Unicode space separators, the line and paragraph separators
/// and the BOM (not U+0085, which Rust's `char::is_whitespace` counts).
pub(crate) fn is_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'
                | '\u{FEFF}'
    )
}

/// `text.trim()`.
pub(crate) fn trim(text: &str) -> &str {
    text.trim_matches(is_space)
}

/// `text.replace(/\s+/g, " ").trim()`.
pub(crate) fn collapse_spaces(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_space = false;
    for c in text.chars() {
        if is_space(c) {
            if !in_space {
                out.push(' ');
            }
            in_space = true;
        } else {
            out.push(c);
            in_space = false;
        }
    }
    trim(&out).to_owned()
}

/// `text.split(/\s+/).filter(w => w.length > 0)`.
pub(crate) fn words(text: &str) -> Vec<&str> {
    text.split(is_space).filter(|w| !w.is_empty()).collect()
}

/// `text.length`: UTF-16 code units.
pub(crate) fn len16(text: &str) -> usize {
    text.encode_utf16().count()
}

/// `text.toLowerCase()` (Unicode's default lowercase, as both languages apply it).
pub(crate) fn lower(text: &str) -> String {
    text.to_lowercase()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn spaces_are_javascripts() {
        assert_eq!(collapse_spaces("  a \t\n b\u{FEFF}"), "a b");
        assert_eq!(words("a\u{85}b c"), vec!["a\u{85}b", "c"]);
        assert_eq!(len16("a😀"), 3);
        assert_eq!(trim("\u{3000}x\u{A0}"), "x");
    }
}
