//! What reaches a terminal: text a server controls (names, messages, Status bodies, label values)
//! is made safe to print, and a closed stderr is noticed.
//!
//! A server can put anything in a name or a message: an escape sequence that recolours the
//! terminal, sets its title, moves the cursor or rewrites what was printed before, a carriage
//! return that hides the start of a line, a right-to-left override that shows text reversed.
//! [`safe`] writes every such character as a visible escape (`\x1b`, `\r`, `\u{202e}`) before the
//! text is printed in a table, an event line or an error. JSON and YAML output is not passed
//! through it: their serializers escape control characters themselves, and the text stays exact.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether `c` must not reach a terminal as it is: a control character (C0, DEL, C1), a line or
/// paragraph separator, or a bidirectional formatting character (they reorder what is shown).
fn unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
        )
}

/// `text` with every character that could act on a terminal written as a visible escape:
/// `\n`, `\r`, `\t`, `\x1b` (other C0 characters and DEL alike), `\u{9b}` (C1 characters, line
/// separators and bidirectional controls alike). Text without any is returned as it is.
pub(crate) fn safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if unsafe_char(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// JSON text with every character [`safe`] would escape written as a JSON `\uXXXX` escape. The
/// serializer already escapes C0 characters; DEL, C1 characters, line separators and
/// bidirectional controls are valid raw in a JSON string, and only in a string (JSON's own
/// syntax is ASCII), so the document means exactly what it did.
pub(crate) fn safe_json(text: String) -> String {
    // C0 characters are escaped in strings already: outside them, they are the document's own
    // line breaks and indentation.
    let escaped = |c: char| c >= ' ' && unsafe_char(c);
    if !text.chars().any(escaped) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escaped(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Set once a write to stderr found it closed (`kinformer watch pods 2>&1 | head`).
static STDERR_CLOSED: AtomicBool = AtomicBool::new(false);
/// Wakes whoever waits in [`stderr_closed`].
static STDERR_CLOSED_NOTIFY: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Records that stderr is closed, if `e` says so.
fn note(e: &std::io::Error) {
    if e.kind() == std::io::ErrorKind::BrokenPipe && !STDERR_CLOSED.swap(true, Ordering::SeqCst) {
        STDERR_CLOSED_NOTIFY.notify_waiters();
    }
}

/// Completes once a write to stderr has found it closed: the reader is gone, so the command
/// ends quietly, as it does when stdout is closed.
pub(crate) async fn stderr_closed() {
    loop {
        let notified = STDERR_CLOSED_NOTIFY.notified();
        if STDERR_CLOSED.load(Ordering::SeqCst) {
            return;
        }
        notified.await;
    }
}

/// Writes one line (or a progress redraw) to stderr. A write error is never a panic, unlike
/// `eprintln!`'s; a closed stderr is recorded for [`stderr_closed`].
pub(crate) fn to_stderr(args: std::fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    if let Err(e) = err.write_fmt(args).and_then(|()| err.flush()) {
        note(&e);
    }
}

/// Where log lines go: stderr, where a closed pipe is recorded (for [`stderr_closed`]) and the
/// line dropped, instead of an error the log formatter would report by writing to stderr again.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LogWriter;

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match std::io::stderr().write(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                note(&e);
                Ok(buf.len())
            }
            other => other,
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match std::io::stderr().flush() {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                note(&e);
                Ok(())
            }
            other => other,
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = Self;

    fn make_writer(&'a self) -> Self::Writer {
        *self
    }
}

/// Formats a log line's fields (its message included) with [`safe`]: a library logs the
/// server's words (`error = %e`), and the formatter leaves most control characters in a field as
/// they are.
pub(crate) fn log_fields() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> {
    use tracing_subscriber::field::MakeExt as _;
    tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let text = format!("{value:?}");
        if field.name() == "message" {
            write!(w, "{}", safe(&text))
        } else {
            write!(w, "{}={}", field.name(), safe(&text))
        }
    })
    .delimited(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_become_visible_escapes() {
        assert!(matches!(safe("web-1 is fine"), Cow::Borrowed(_)));
        assert_eq!(safe("ünïcødé ✓"), "ünïcødé ✓");
        assert_eq!(
            safe("\x1b[31mred\x1b[0m\x1b]0;title\x07"),
            "\\x1b[31mred\\x1b[0m\\x1b]0;title\\x07"
        );
        assert_eq!(safe("a\nb\rc\td"), "a\\nb\\rc\\td");
        assert_eq!(safe("\0\x7f\x08"), "\\x00\\x7f\\x08");
        // C1: the one-byte CSI, and NEL.
        assert_eq!(safe("\u{9b}2J\u{85}"), "\\u{9b}2J\\u{85}");
        // Text shown reversed, or broken across lines.
        assert_eq!(
            safe("abc\u{202e}fed\u{2066}\u{2028}"),
            "abc\\u{202e}fed\\u{2066}\\u{2028}"
        );
        // Nothing that acts on a terminal is left.
        let all: String = (0u32..0x3000).filter_map(char::from_u32).collect();
        assert!(!safe(&all).chars().any(unsafe_char));
    }

    #[test]
    fn json_keeps_its_meaning_without_raw_controls() {
        let value = serde_json::json!({"n\u{9b}": "a\u{1b}b\u{7f}c\u{202e}d\u{2028}é😀"});
        for text in [
            serde_json::to_string(&value).unwrap(),
            serde_json::to_string_pretty(&value).unwrap(),
        ] {
            let safe = safe_json(text);
            assert!(
                !safe.chars().any(|c| unsafe_char(c) && c != '\n'),
                "{safe:?}"
            );
            assert_eq!(
                serde_json::from_str::<serde_json::Value>(&safe).unwrap(),
                value
            );
        }
        assert_eq!(safe_json("{\"a\":1}".into()), "{\"a\":1}");
    }
}
