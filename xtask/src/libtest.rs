//! Reads the output of Rust's test harness (libtest): per-test lines
//! `test NAME ... ok|FAILED|ignored[, reason]` and the closing `test result:` line.

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Passed,
    Failed,
    /// Not run; libtest prints the `#[ignore = "..."]` reason when there is one.
    Ignored(Option<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestLine {
    pub name: String,
    pub verdict: Verdict,
}

/// The counts of a `test result: ...` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    pub passed: u32,
    pub failed: u32,
    pub ignored: u32,
}

#[derive(Debug, Default)]
pub struct Parsed {
    pub tests: Vec<TestLine>,
    pub summary: Option<Summary>,
    /// The name of a test that started but has no verdict (the binary died or hung in it).
    pub unfinished: Option<String>,
}

fn verdict(s: &str) -> Option<Verdict> {
    let s = s.trim();
    match s {
        "ok" => Some(Verdict::Passed),
        "FAILED" => Some(Verdict::Failed),
        "ignored" => Some(Verdict::Ignored(None)),
        _ => s
            .strip_prefix("ignored, ")
            .map(|r| Verdict::Ignored(Some(r.to_string()))),
    }
}

fn summary(line: &str) -> Option<Summary> {
    let rest = line.trim().strip_prefix("test result: ")?;
    let (_, counts) = rest.split_once(". ")?;
    let mut s = Summary::default();
    for part in counts.split(';') {
        let mut it = part.split_whitespace();
        let (Some(n), Some(what)) = (it.next(), it.next()) else {
            continue;
        };
        let Ok(n) = n.parse() else { continue };
        match what {
            "passed" => s.passed = n,
            "failed" => s.failed = n,
            "ignored" => s.ignored = n,
            _ => {}
        }
    }
    Some(s)
}

pub fn parse(lines: &[String]) -> Parsed {
    let mut p = Parsed::default();
    for line in lines {
        if let Some(s) = summary(line) {
            p.summary = Some(s);
            continue;
        }
        if let Some(rest) = line.strip_prefix("test ") {
            if let Some((name, result)) = rest.rsplit_once(" ... ") {
                let name = name.trim_end_matches(" - should panic").to_string();
                match verdict(result) {
                    Some(v) => {
                        p.unfinished = None;
                        p.tests.push(TestLine { name, verdict: v });
                    }
                    // Output that is not captured (a child process, the kernel) can land
                    // between the name and the verdict; the verdict then has a line of its own.
                    None => p.unfinished = Some(name),
                }
                continue;
            }
            if let Some(name) = rest.strip_suffix(" ...") {
                p.unfinished = Some(name.trim_end_matches(" - should panic").to_string());
                continue;
            }
        }
        if let Some(name) = p.unfinished.clone() {
            // The verdict may be the end of a line that some other output started.
            let last = line.trim().rsplit(' ').next().unwrap_or("");
            if let Some(v) =
                verdict(line).or_else(|| verdict(last).filter(|v| *v != Verdict::Ignored(None)))
            {
                p.unfinished = None;
                p.tests.push(TestLine { name, verdict: v });
            }
        }
    }
    p
}

/// Test names from `<test binary> --list` (lines `NAME: test`).
pub fn parse_list(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_string)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_string).collect()
    }

    #[test]
    fn parses_verdicts_reasons_and_summary() {
        let out = lines(
            "\nrunning 4 tests\n\
             test cq::poll_empty ... ok\n\
             test qp::rc_send ... FAILED\n\
             test efa::efa_hw_srd ... ignored, needs EFA hardware\n\
             test panics - should panic ... ok\n\
             \nfailures:\n\n---- qp::rc_send stdout ----\nthread panicked\n\n\
             test result: FAILED. 2 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; finished in 0.01s\n",
        );
        let p = parse(&out);
        assert_eq!(
            p.tests,
            vec![
                TestLine {
                    name: "cq::poll_empty".into(),
                    verdict: Verdict::Passed
                },
                TestLine {
                    name: "qp::rc_send".into(),
                    verdict: Verdict::Failed
                },
                TestLine {
                    name: "efa::efa_hw_srd".into(),
                    verdict: Verdict::Ignored(Some("needs EFA hardware".into()))
                },
                TestLine {
                    name: "panics".into(),
                    verdict: Verdict::Passed
                },
            ]
        );
        assert_eq!(
            p.summary,
            Some(Summary {
                passed: 2,
                failed: 1,
                ignored: 1
            })
        );
        assert_eq!(p.unfinished, None);
    }

    #[test]
    fn verdict_after_interleaved_output_and_unfinished_test() {
        let p = parse(&lines(
            "test a ... noise from a child\nmore noise ok\ntest b ... ",
        ));
        assert_eq!(
            p.tests,
            vec![TestLine {
                name: "a".into(),
                verdict: Verdict::Passed
            }]
        );
        assert_eq!(p.unfinished.as_deref(), Some("b"));
        let p = parse(&lines("test c ..."));
        assert_eq!(p.unfinished.as_deref(), Some("c"));
    }

    #[test]
    fn list_output() {
        assert_eq!(
            parse_list("a::b: test\nc: test\nbench_x: bench\n\n2 tests, 1 benchmark\n"),
            ["a::b", "c"]
        );
    }
}
