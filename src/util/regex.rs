//! Regular expressions in Go's syntax (RE2, as `regexp.MatchString` reads them), for the
//! subset that allowlists of sysctl names use, matched in linear time (a Pike VM without
//! captures: only whether there is a match).
//!
//! Supported: literals; `.` (any character but `\n`); `[…]` and `[^…]` classes with ranges
//! and escapes; `\d \D \s \S \w \W` (ASCII, as Go), also inside classes; `^ $ \A \z`
//! (start and end of the text: Go's default, without the `m` flag) and `\b \B`; groups
//! `(…)` and `(?:…)`; alternation `|`; `* + ?` and `{n} {n,} {n,m}` (n, m ≤ 1000), also
//! non-greedy (`*?` …, which does not change whether there is a match); escapes of
//! punctuation, `\a \f \t \n \r \v`, `\x7F`, `\x{10FFFF}` and octal `\123`.
//!
//! A pattern Go rejects is rejected with Go's own message (`error parsing regexp: missing
//! closing ): `(a``), found in the same left-to-right order. Valid Go syntax outside the
//! subset is an [`Error::Unsupported`] naming the construct, never a silent accept: flags and
//! named groups (`(?i)`, `(?P<n>…)`), Unicode classes (`\pL`), POSIX classes (`[[:alpha:]]`)
//! and `\Q…\E`.
use std::fmt;

/// Go's limit on a repeat count.
const MAX_REPEAT: u32 = 1000;
/// Groups nested deeper are refused as unsupported. Go refuses a parse tree more than 1000
/// levels high, and a group level adds at most 4 (group, repetition, concatenation,
/// alternation): below this, Go never refuses a pattern for its depth, so cnibox never
/// accepts one Go would refuse.
const MAX_DEPTH: usize = 200;
/// Instructions of one compiled pattern (a `{1000}` of a long group grows quickly).
const MAX_PROGRAM: usize = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Go rejects the pattern too: its error code text and the part it quotes.
    Syntax { code: &'static str, expr: String },
    /// Valid in Go, outside what cnibox matches: which construct, and where.
    Unsupported { what: &'static str, expr: String },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Syntax { code, expr } => write!(f, "error parsing regexp: {code}: `{expr}`"),
            Error::Unsupported { what, expr } => write!(
                f,
                "unsupported regexp syntax: {what} `{expr}` (cnibox matches a subset of Go's regexp syntax)"
            ),
        }
    }
}

impl std::error::Error for Error {}

const MISSING_PAREN: &str = "missing closing )";
const UNEXPECTED_PAREN: &str = "unexpected )";
const MISSING_BRACKET: &str = "missing closing ]";
const MISSING_ARGUMENT: &str = "missing argument to repetition operator";
const NESTED_REPEAT: &str = "invalid nested repetition operator";
const REPEAT_SIZE: &str = "invalid repeat count";
const INVALID_ESCAPE: &str = "invalid escape sequence";
const TRAILING_BACKSLASH: &str = "trailing backslash at end of expression";
const CHAR_RANGE: &str = "invalid character class range";

fn syntax(code: &'static str, expr: &str) -> Error {
    Error::Syntax {
        code,
        expr: expr.to_string(),
    }
}

fn unsupported(what: &'static str, expr: &str) -> Error {
    Error::Unsupported {
        what,
        expr: expr.to_string(),
    }
}

/// Character ranges, inclusive, as code points.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
struct Class(Vec<(u32, u32)>);

const MAX_CHAR: u32 = 0x10FFFF;

/// The names Go knows in `[[:name:]]` (any other is its "invalid character class range").
const POSIX_CLASSES: &[&str] = &[
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space", "upper", "word",
    "xdigit",
];

impl Class {
    fn push(&mut self, lo: u32, hi: u32) {
        self.0.push((lo, hi));
    }

    fn extend(&mut self, other: &Class) {
        self.0.extend_from_slice(&other.0);
    }

    fn contains(&self, c: char) -> bool {
        let c = c as u32;
        self.0.iter().any(|&(lo, hi)| lo <= c && c <= hi)
    }

    /// Every code point not in the class.
    fn negated(&self) -> Class {
        let mut ranges = self.0.clone();
        crate::util::sort::sort(&mut ranges);
        let mut out = Class::default();
        let mut next = 0u32;
        for (lo, hi) in ranges {
            if lo > next {
                out.push(next, lo - 1);
            }
            next = next.max(hi.saturating_add(1));
        }
        if next <= MAX_CHAR {
            out.push(next, MAX_CHAR);
        }
        out
    }

    /// `\d \s \w` and their negations (Go's Perl groups: ASCII only).
    fn perl(letter: char) -> Option<Class> {
        let ranges: &[(u8, u8)] = match letter.to_ascii_lowercase() {
            'd' => &[(b'0', b'9')],
            's' => &[(b'\t', b'\n'), (0x0c, b'\r'), (b' ', b' ')],
            'w' => &[(b'0', b'9'), (b'A', b'Z'), (b'_', b'_'), (b'a', b'z')],
            _ => return None,
        };
        let class = Class(ranges.iter().map(|&(lo, hi)| (lo as u32, hi as u32)).collect());
        Some(if letter.is_ascii_uppercase() {
            class.negated()
        } else {
            class
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Assertion {
    BeginText,
    EndText,
    WordBoundary,
    NotWordBoundary,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Empty,
    Char(char),
    AnyButNewline,
    Class(Class),
    Assert(Assertion),
    Concat(Vec<Node>),
    Alternate(Vec<Node>),
    /// `max` None: unbounded.
    Repeat {
        sub: Box<Node>,
        min: u32,
        max: Option<u32>,
        /// Written as `{…}` (Go checks nested counts of those only).
        counted: bool,
    },
}

impl Node {
    /// Go's `repeatIsValid`: nested `{…}` counts multiply to at most `n` copies.
    fn repeat_is_valid(&self, mut n: u32) -> bool {
        match self {
            Node::Repeat {
                sub,
                min,
                max,
                counted: true,
            } => {
                let m = max.unwrap_or(*min);
                if m == 0 {
                    return true;
                }
                if m > n {
                    return false;
                }
                n /= m;
                sub.repeat_is_valid(n)
            }
            Node::Repeat { sub, .. } => sub.repeat_is_valid(n),
            Node::Concat(subs) | Node::Alternate(subs) => subs.iter().all(|s| s.repeat_is_valid(n)),
            _ => true,
        }
    }
}

struct Parser<'a> {
    whole: &'a str,
    rest: &'a str,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<char> {
        self.rest.chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.rest = &self.rest[c.len_utf8()..];
        Some(c)
    }

    /// The text between `from` (a suffix of the pattern seen earlier) and what is left.
    fn since(&self, from: &'a str) -> &'a str {
        &from[..from.len() - self.rest.len()]
    }

    fn alternation(&mut self) -> Result<Node, Error> {
        self.depth += 1;
        if self.depth > MAX_DEPTH + 1 {
            return Err(unsupported("groups nested more than 200 deep", self.whole));
        }
        let mut alternatives = vec![self.concatenation()?];
        while self.rest.starts_with('|') {
            self.bump();
            alternatives.push(self.concatenation()?);
        }
        self.depth -= 1;
        Ok(if alternatives.len() == 1 {
            alternatives.pop().expect("one")
        } else {
            Node::Alternate(alternatives)
        })
    }

    fn concatenation(&mut self) -> Result<Node, Error> {
        let mut items: Vec<Node> = vec![];
        // where the repetition operator just read started, if the last item was one
        let mut last_repeat: Option<&'a str> = None;
        while let Some(c) = self.peek() {
            let mut repeat = None;
            match c {
                '|' | ')' => break,
                '(' => items.push(self.group()?),
                '[' => items.push(self.class()?),
                '*' | '+' | '?' => {
                    let before = self.rest;
                    self.bump();
                    let (min, max) = match c {
                        '*' => (0, None),
                        '+' => (1, None),
                        _ => (0, Some(1)),
                    };
                    self.repeat(&mut items, before, last_repeat, min, max, false)?;
                    repeat = Some(before);
                }
                '{' => {
                    let before = self.rest;
                    match counted_repeat(&before[1..]) {
                        None => {
                            // not a repetition: a literal brace, as in Go
                            self.bump();
                            items.push(Node::Char('{'));
                        }
                        Some((min, max, after)) => {
                            self.rest = after;
                            let too_big = |n: i64| !(0..=i64::from(MAX_REPEAT)).contains(&n);
                            if too_big(min) || max.is_some_and(too_big) || max.is_some_and(|m| min > m) {
                                return Err(syntax(REPEAT_SIZE, self.since(before)));
                            }
                            let max = max.map(|m| m as u32);
                            self.repeat(&mut items, before, last_repeat, min as u32, max, true)?;
                            repeat = Some(before);
                        }
                    }
                }
                '^' => {
                    self.bump();
                    items.push(Node::Assert(Assertion::BeginText));
                }
                '$' => {
                    self.bump();
                    items.push(Node::Assert(Assertion::EndText));
                }
                '.' => {
                    self.bump();
                    items.push(Node::AnyButNewline);
                }
                '\\' => items.push(self.escape_outside_class()?),
                c => {
                    self.bump();
                    items.push(Node::Char(c));
                }
            }
            last_repeat = repeat;
        }
        Ok(match items.len() {
            0 => Node::Empty,
            1 => items.pop().expect("one"),
            _ => Node::Concat(items),
        })
    }

    /// Applies the operator read since `before` (and its `?`, which only makes it
    /// non-greedy) to the last item, with Go's checks in Go's order.
    fn repeat(
        &mut self,
        items: &mut Vec<Node>,
        before: &'a str,
        last_repeat: Option<&'a str>,
        min: u32,
        max: Option<u32>,
        counted: bool,
    ) -> Result<(), Error> {
        if self.rest.starts_with('?') {
            self.bump();
        }
        if let Some(last) = last_repeat {
            return Err(syntax(NESTED_REPEAT, self.since(last)));
        }
        let Some(sub) = items.pop() else {
            return Err(syntax(MISSING_ARGUMENT, self.since(before)));
        };
        let node = Node::Repeat {
            sub: Box::new(sub),
            min,
            max,
            counted,
        };
        if counted && (min >= 2 || max.is_some_and(|m| m >= 2)) && !node.repeat_is_valid(MAX_REPEAT) {
            return Err(syntax(REPEAT_SIZE, self.since(before)));
        }
        items.push(node);
        Ok(())
    }

    fn group(&mut self) -> Result<Node, Error> {
        let start = self.rest;
        if let Some(rest) = start.strip_prefix("(?:") {
            self.rest = rest;
        } else if start.starts_with("(?") {
            return Err(unsupported("flags and named groups", &start[..2]));
        } else {
            self.bump();
        }
        let inner = self.alternation()?;
        if self.bump() != Some(')') {
            return Err(syntax(MISSING_PAREN, self.whole));
        }
        Ok(inner)
    }

    fn escape_outside_class(&mut self) -> Result<Node, Error> {
        let start = self.rest;
        let mut chars = start[1..].chars();
        let assertion = match chars.next() {
            Some('A') => Some(Assertion::BeginText),
            Some('z') => Some(Assertion::EndText),
            Some('b') => Some(Assertion::WordBoundary),
            Some('B') => Some(Assertion::NotWordBoundary),
            Some('C') => return Err(syntax(INVALID_ESCAPE, &start[..2])),
            Some('Q') => return Err(unsupported("literal text", &start[..2])),
            _ => None,
        };
        if let Some(a) = assertion {
            self.rest = &start[2..];
            return Ok(Node::Assert(a));
        }
        if let Some(class) = self.perl_class()? {
            return Ok(Node::Class(class));
        }
        // a surrogate (`\x{D800}`) is a valid escape in Go that no text can match
        let c = self.escaped_char()?;
        Ok(char::from_u32(c).map_or(Node::Class(Class(vec![(c, c)])), Node::Char))
    }

    /// `\d` and the like at the start of what is left (`\p` is outside the subset).
    fn perl_class(&mut self) -> Result<Option<Class>, Error> {
        let mut chars = self.rest.chars();
        if chars.next() != Some('\\') {
            return Ok(None);
        }
        match chars.next() {
            Some(c @ ('p' | 'P')) => Err(unsupported("Unicode classes", &self.rest[..1 + c.len_utf8()])),
            Some(c) => Ok(Class::perl(c).inspect(|_| self.rest = &self.rest[2..])),
            None => Ok(None),
        }
    }

    /// Go's `parseEscape`: a single character written with a backslash, as a code point.
    fn escaped_char(&mut self) -> Result<u32, Error> {
        let start = self.rest;
        self.bump();
        let Some(c) = self.bump() else {
            return Err(syntax(TRAILING_BACKSLASH, ""));
        };
        let invalid = |p: &Self| Err(syntax(INVALID_ESCAPE, p.since(start)));
        match c {
            c if c.is_ascii() && !c.is_ascii_alphanumeric() => Ok(c as u32),
            '1'..='7' if !self.peek().is_some_and(|d| ('0'..='7').contains(&d)) => invalid(self),
            '0'..='7' => {
                let mut value = c as u32 - '0' as u32;
                for _ in 1..3 {
                    match self.peek() {
                        Some(d @ '0'..='7') => {
                            self.bump();
                            value = value * 8 + (d as u32 - '0' as u32);
                        }
                        _ => break,
                    }
                }
                Ok(value)
            }
            'x' => self.hex_escape().map_or_else(|| invalid(self), Ok),
            'a' => Ok(0x07),
            'f' => Ok(0x0c),
            'n' => Ok(0x0a),
            'r' => Ok(0x0d),
            't' => Ok(0x09),
            'v' => Ok(0x0b),
            _ => invalid(self),
        }
    }

    /// After `\x`: two hex digits, or any number in braces (at least one).
    fn hex_escape(&mut self) -> Option<u32> {
        let first = self.bump()?;
        if first == '{' {
            let mut value = 0u32;
            let mut digits = 0;
            loop {
                let c = self.bump()?;
                if c == '}' {
                    break;
                }
                value = value * 16 + c.to_digit(16)?;
                if value > MAX_CHAR {
                    return None;
                }
                digits += 1;
            }
            return (digits > 0).then_some(value);
        }
        let second = self.bump()?;
        Some(first.to_digit(16)? * 16 + second.to_digit(16)?)
    }

    /// Go's `parseClass`.
    fn class(&mut self) -> Result<Node, Error> {
        let whole_class = self.rest;
        self.bump();
        let negated = self.rest.starts_with('^');
        if negated {
            self.bump();
        }
        let mut class = Class::default();
        let mut first = true;
        loop {
            match self.peek() {
                Some(']') if !first => break,
                None => return Err(syntax(MISSING_BRACKET, whole_class)),
                _ => {}
            }
            first = false;
            if self.rest.starts_with("[:") && self.rest[2..].contains(":]") {
                let end = self.rest[2..].find(":]").expect("checked") + 4;
                let named = &self.rest[..end];
                let name = &named[2..end - 2];
                return Err(if POSIX_CLASSES.contains(&name.strip_prefix('^').unwrap_or(name)) {
                    unsupported("POSIX classes", named)
                } else {
                    syntax(CHAR_RANGE, named)
                });
            }
            if let Some(perl) = self.perl_class()? {
                class.extend(&perl);
                continue;
            }
            let range_start = self.rest;
            let lo = self.class_char(whole_class)?;
            let mut hi = lo;
            let mut next = self.rest.chars();
            if next.next() == Some('-') && next.next().is_some_and(|c| c != ']') {
                self.bump();
                hi = self.class_char(whole_class)?;
                if hi < lo {
                    return Err(syntax(CHAR_RANGE, self.since(range_start)));
                }
            }
            class.push(lo, hi);
        }
        self.bump();
        Ok(Node::Class(if negated { class.negated() } else { class }))
    }

    fn class_char(&mut self, whole_class: &str) -> Result<u32, Error> {
        match self.peek() {
            None => Err(syntax(MISSING_BRACKET, whole_class)),
            Some('\\') => self.escaped_char(),
            Some(c) => {
                self.bump();
                Ok(c as u32)
            }
        }
    }
}

/// Go's `parseRepeat` after the `{`: `n}`, `n,}` or `n,m}` (no sign, no leading zero);
/// `None` when the text is not of that form (the brace is then a literal). Counts too big
/// for Go's parser come back as -1.
fn counted_repeat(s: &str) -> Option<(i64, Option<i64>, &str)> {
    let (min, rest) = decimal(s)?;
    let (max, rest) = match rest.strip_prefix(',') {
        None => (Some(min), rest),
        Some(r) if r.starts_with('}') => (None, r),
        Some(r) => {
            let (max, r) = decimal(r)?;
            (Some(max), r)
        }
    };
    // a max too big makes the whole repeat invalid, as in Go
    let min = if max == Some(-1) { -1 } else { min };
    Some((min, max, rest.strip_prefix('}')?))
}

/// Go's `parseInt`: digits without a leading zero; values from 10^8 on are -1.
fn decimal(s: &str) -> Option<(i64, &str)> {
    let len = s.bytes().take_while(u8::is_ascii_digit).count();
    if len == 0 || (len >= 2 && s.starts_with('0')) {
        return None;
    }
    let mut n: i64 = 0;
    for d in s[..len].bytes() {
        if n >= 100_000_000 {
            n = -1;
            break;
        }
        n = n * 10 + i64::from(d - b'0');
    }
    Some((n, &s[len..]))
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Inst {
    Char(char),
    AnyButNewline,
    Class(Class),
    Assert(Assertion),
    Split(usize, usize),
    Jump(usize),
    Match,
}

struct Compiler {
    prog: Vec<Inst>,
}

impl Compiler {
    fn emit(&mut self, inst: Inst) -> Result<usize, Error> {
        if self.prog.len() >= MAX_PROGRAM {
            return Err(unsupported("a pattern this large", "…"));
        }
        self.prog.push(inst);
        Ok(self.prog.len() - 1)
    }

    fn node(&mut self, n: &Node) -> Result<(), Error> {
        match n {
            Node::Empty => {}
            Node::Char(c) => {
                self.emit(Inst::Char(*c))?;
            }
            Node::AnyButNewline => {
                self.emit(Inst::AnyButNewline)?;
            }
            Node::Class(c) => {
                self.emit(Inst::Class(c.clone()))?;
            }
            Node::Assert(a) => {
                self.emit(Inst::Assert(*a))?;
            }
            Node::Concat(items) => {
                for item in items {
                    self.node(item)?;
                }
            }
            Node::Alternate(alternatives) => {
                let mut jumps = vec![];
                for (i, alt) in alternatives.iter().enumerate() {
                    if i + 1 < alternatives.len() {
                        let split = self.emit(Inst::Split(0, 0))?;
                        self.node(alt)?;
                        jumps.push(self.emit(Inst::Jump(0))?);
                        let next = self.prog.len();
                        self.prog[split] = Inst::Split(split + 1, next);
                    } else {
                        self.node(alt)?;
                    }
                }
                let end = self.prog.len();
                for j in jumps {
                    self.prog[j] = Inst::Jump(end);
                }
            }
            Node::Repeat { sub, min, max, .. } => {
                for _ in 0..*min {
                    self.node(sub)?;
                }
                match max {
                    None => {
                        // sub*: split to the body or past the loop, back to the split
                        let split = self.emit(Inst::Split(0, 0))?;
                        self.node(sub)?;
                        self.emit(Inst::Jump(split))?;
                        let end = self.prog.len();
                        self.prog[split] = Inst::Split(split + 1, end);
                    }
                    Some(max) => {
                        // sub? nested (max - min) times: each optional copy may be skipped
                        let mut splits = vec![];
                        for _ in *min..*max {
                            splits.push(self.emit(Inst::Split(0, 0))?);
                            self.node(sub)?;
                        }
                        let end = self.prog.len();
                        for s in splits {
                            self.prog[s] = Inst::Split(s + 1, end);
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// A compiled pattern.
#[derive(Debug, Clone)]
pub struct Regex {
    prog: Vec<Inst>,
}

fn is_word(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
}

impl Regex {
    /// Parse `pattern` as Go's `regexp.Compile` does (see the module comment for the subset).
    pub fn new(pattern: &str) -> Result<Regex, Error> {
        let mut p = Parser {
            whole: pattern,
            rest: pattern,
            depth: 0,
        };
        let tree = p.alternation()?;
        if !p.rest.is_empty() {
            // only a `)` stops the top level early
            return Err(syntax(UNEXPECTED_PAREN, pattern));
        }
        let mut c = Compiler { prog: vec![] };
        c.node(&tree)?;
        c.emit(Inst::Match)?;
        Ok(Regex { prog: c.prog })
    }

    /// Whether the pattern matches anywhere in `text` (Go's `MatchString`: unanchored
    /// unless the pattern anchors itself).
    pub fn is_match(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        let n = self.prog.len();
        let mut current: Vec<usize> = Vec::with_capacity(n);
        let mut next: Vec<usize> = Vec::with_capacity(n);
        let mut seen = vec![usize::MAX; n];
        let mut stack = Vec::with_capacity(n);
        for pos in 0..=chars.len() {
            // a new attempt starts at every position (the unanchored search)
            if self.add(&mut current, &mut seen, &mut stack, 0, pos, &chars) {
                return true;
            }
            let Some(&c) = chars.get(pos) else { break };
            next.clear();
            for &pc in &current {
                let advances = match &self.prog[pc] {
                    Inst::Char(want) => *want == c,
                    Inst::AnyButNewline => c != '\n',
                    Inst::Class(class) => class.contains(c),
                    _ => false,
                };
                if advances && self.add(&mut next, &mut seen, &mut stack, pc + 1, pos + 1, &chars) {
                    return true;
                }
            }
            std::mem::swap(&mut current, &mut next);
        }
        false
    }

    /// Adds `pc` and everything reachable from it without reading a character to `list`
    /// (each instruction once per position); true when that reaches the end of the pattern.
    fn add(
        &self,
        list: &mut Vec<usize>,
        seen: &mut [usize],
        stack: &mut Vec<usize>,
        pc: usize,
        pos: usize,
        chars: &[char],
    ) -> bool {
        stack.push(pc);
        while let Some(pc) = stack.pop() {
            if seen[pc] == pos {
                continue;
            }
            seen[pc] = pos;
            match &self.prog[pc] {
                Inst::Match => {
                    stack.clear();
                    return true;
                }
                Inst::Jump(to) => stack.push(*to),
                Inst::Split(a, b) => {
                    stack.push(*b);
                    stack.push(*a);
                }
                Inst::Assert(a) => {
                    let before = pos.checked_sub(1).map(|i| chars[i]);
                    let after = chars.get(pos).copied();
                    let holds = match a {
                        Assertion::BeginText => pos == 0,
                        Assertion::EndText => pos == chars.len(),
                        Assertion::WordBoundary => is_word(before) != is_word(after),
                        Assertion::NotWordBoundary => is_word(before) == is_word(after),
                    };
                    if holds {
                        stack.push(pc + 1);
                    }
                }
                _ => list.push(pc),
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matches(pattern: &str, text: &str) -> bool {
        Regex::new(pattern)
            .unwrap_or_else(|e| panic!("{pattern}: {e}"))
            .is_match(text)
    }

    fn error(pattern: &str) -> String {
        Regex::new(pattern)
            .err()
            .unwrap_or_else(|| panic!("{pattern} parsed"))
            .to_string()
    }

    /// Each pattern, texts and verdicts as Go's `regexp.MatchString` gives them (checked
    /// with tests/interop/regexp_oracle.go; `reliability::fuzz` compares at random).
    #[test]
    fn matches_as_go_does() {
        let cases: &[(&str, &[(&str, bool)])] = &[
            (
                r"^net\.ipv4\.conf\.other\.[a-z_]*$",
                &[
                    ("net.ipv4.conf.other.rp_filter", true),
                    ("net.ipv4.conf.other.rp_filter2", false),
                    ("xnet.ipv4.conf.other.rp_filter", false),
                    ("net.ipv4.conf.otherXrp", false),
                ],
            ),
            (
                r"^net\.ipv4\.conf\.IFNAME\.[a-z_]*$",
                &[
                    ("net.ipv4.conf.IFNAME.arp_filter", true),
                    ("net.ipv4.conf.eth0.arp_filter", false),
                ],
            ),
            // unanchored: anywhere in the name
            (
                "somaxconn",
                &[("net.core.somaxconn", true), ("net.core.somaxcon", false)],
            ),
            (
                r"^net\.(ipv4|ipv6)\.conf\.(all|default)\.forwarding$",
                &[
                    ("net.ipv6.conf.all.forwarding", true),
                    ("net.ipv4.conf.default.forwarding", true),
                    ("net.ipv4.conf.eth0.forwarding", false),
                ],
            ),
            (
                "^a+b?c*$",
                &[("a", true), ("aab", true), ("aabccc", true), ("b", false), ("", false)],
            ),
            (
                "^(ab){2,3}$",
                &[("ab", false), ("abab", true), ("ababab", true), ("abababab", false)],
            ),
            (
                "^x{2}$|^y{2,}$",
                &[
                    ("xx", true),
                    ("xxx", false),
                    ("yy", true),
                    ("yyyyy", true),
                    ("y", false),
                ],
            ),
            ("^[^.]+$", &[("abc", true), ("a.b", false), ("\n", true)]),
            ("^.$", &[("a", true), ("\n", false), ("é", true)]),
            (r"[\d_]", &[("a", false), ("5", true), ("_", true)]),
            (r"\bconf\b", &[("net.conf.x", true), ("netconf", false)]),
            (r"\Bonf", &[("conf", true), ("onf", false)]),
            (r"^\x41\x{42}\103$", &[("ABC", true), ("abc", false)]),
            // not a repetition: a literal brace
            ("a{,2}", &[("a{,2}", true), ("aa", false)]),
            ("(?:a|b)+$", &[("xab", true), ("x", false)]),
            ("[]a]", &[("]", true), ("a", true), ("b", false)]),
            ("[a-]", &[("-", true), ("a", true), ("b", false)]),
            ("$^", &[("", true), ("a", false)]),
            ("^*a", &[("a", true)]),
            (r"\Aa\z", &[("a", true), ("a\n", false)]),
            // `$` is the end of the text only (no `m` flag)
            ("a$", &[("a\n", false), ("a", true)]),
            ("[^a]", &[("\n", true)]),
            (r"\W", &[("\n", true), ("a", false)]),
            (r"\x{D800}", &[("a", false), ("\u{fffd}", false)]),
            ("a*?$|b??", &[("", true)]),
        ];
        for (pattern, texts) in cases {
            for (text, want) in *texts {
                assert_eq!(matches(pattern, text), *want, "{pattern} on {text:?}");
            }
        }
    }

    #[test]
    fn go_rejects_these_with_these_messages() {
        let cases = [
            ("(abc", "missing closing ): `(abc`"),
            ("abc)", "unexpected ): `abc)`"),
            ("[abc", "missing closing ]: `[abc`"),
            ("x[a", "missing closing ]: `[a`"),
            ("*a", "missing argument to repetition operator: `*`"),
            ("a**", "invalid nested repetition operator: `**`"),
            ("a*?+", "invalid nested repetition operator: `*?+`"),
            ("x*{2}", "invalid nested repetition operator: `*{2}`"),
            ("a{2}{3}", "invalid nested repetition operator: `{2}{3}`"),
            (r"\q", r"invalid escape sequence: `\q`"),
            ("a\\", "trailing backslash at end of expression: ``"),
            ("[z-a]", "invalid character class range: `z-a`"),
            ("a{1001}", "invalid repeat count: `{1001}`"),
            ("a{3,2}", "invalid repeat count: `{3,2}`"),
            ("(a{10}){200}", "invalid repeat count: `{200}`"),
            ("(a{10}){200}?", "invalid repeat count: `{200}?`"),
            (r"\8", r"invalid escape sequence: `\8`"),
            (r"\1", r"invalid escape sequence: `\1`"),
            (r"\x", r"invalid escape sequence: `\x`"),
            (r"\xZ1", r"invalid escape sequence: `\xZ1`"),
            (r"\x{}", r"invalid escape sequence: `\x{}`"),
            (r"\x{110000}", r"invalid escape sequence: `\x{110000`"),
            (r"\C", r"invalid escape sequence: `\C`"),
            (r"[\b]", r"invalid escape sequence: `\b`"),
            ("(*)", "missing argument to repetition operator: `*`"),
            ("a|*", "missing argument to repetition operator: `*`"),
            ("[]", "missing closing ]: `[]`"),
            ("[^]", "missing closing ]: `[^]`"),
            ("[[:foo:]]", "invalid character class range: `[:foo:]`"),
            ("{2}", "missing argument to repetition operator: `{2}`"),
            ("a{99999999999}", "invalid repeat count: `{99999999999}`"),
            ("(?:*)", "missing argument to repetition operator: `*`"),
            ("a{1,99999999999}", "invalid repeat count: `{1,99999999999}`"),
            (r"[a-\q]", r"invalid escape sequence: `\q`"),
        ];
        for (pattern, want) in cases {
            assert_eq!(error(pattern), format!("error parsing regexp: {want}"), "{pattern}");
        }
    }

    #[test]
    fn valid_go_outside_the_subset_is_refused_not_accepted() {
        let deep = format!("{}a{}", "(".repeat(201), ")".repeat(201));
        assert!(Regex::new(&format!("{}a{}", "(".repeat(200), ")".repeat(200))).is_ok());
        for (pattern, construct) in [
            ("(?i)net", "flags and named groups `(?`"),
            ("(?P<x>a)", "flags and named groups `(?`"),
            (r"\pL", r"Unicode classes `\p`"),
            (r"[\p{Greek}]", r"Unicode classes `\p`"),
            ("[[:alpha:]]", "POSIX classes `[:alpha:]`"),
            ("[[:^digit:]]", "POSIX classes `[:^digit:]`"),
            (r"\Qa.b\E", r"literal text `\Q`"),
            (&deep, &format!("groups nested more than 200 deep `{deep}`")),
        ] {
            let e = Regex::new(pattern).unwrap_err();
            assert!(matches!(e, Error::Unsupported { .. }), "{pattern}: {e:?}");
            assert_eq!(
                e.to_string(),
                format!("unsupported regexp syntax: {construct} (cnibox matches a subset of Go's regexp syntax)"),
                "{pattern}"
            );
        }
    }

    /// Linear time: nested repetitions that make a backtracking matcher explode are one
    /// pass over the text here (a timed test would be a bench; this one only has to end).
    #[test]
    fn nested_repetitions_do_not_backtrack() {
        let text = format!("{}!", "a".repeat(2000));
        assert!(!matches("^(a*)*$", &text));
        assert!(!matches("^(a|aa)+$", &text));
        assert!(matches("(a{1,30}){1,30}!", &text));
    }
}
