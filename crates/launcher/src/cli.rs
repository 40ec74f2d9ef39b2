//! The launcher's whole command line, one clap definition for every
//! subcommand: `ibv-shim [options] -- PROGRAM ARGS...`, `ibv-shim trace`
//! and `ibv-shim report merge`. Each option takes its value as the next
//! argument or after `=` (`--log debug`, `--log=debug`); a repeated
//! option's last value wins. `--help` on each command prints its
//! hand-written text (`options::help`, `trace::HELP`, `merge::help`), which
//! the man page and docs/ are checked against.
//!
//! For a run, everything after the first `--` is the program and its
//! arguments, passed through untouched: clap only sees what comes before
//! (no option takes `--` as its value). A usage error names the option
//! and what is wrong with it (exit status 2, as before).

use std::ffi::OsString;
use std::path::PathBuf;

use clap::builder::{OsStringValueParser, TypedValueParser};
use clap::error::{ContextKind, ErrorKind};
use clap::{Args, Parser, Subcommand};

use crate::merge::MergeOptions;
use crate::options::{Command, Options, UsageError, DEFAULT_LEAK_EXITCODE, LOG_LEVELS};
use crate::sweep::Sweep;
use crate::trace::{Format, TraceOptions};

#[derive(Parser, Debug)]
#[command(
    name = "ibv-shim",
    version,
    override_help = crate::options::help(),
    disable_help_subcommand = true,
    args_conflicts_with_subcommands = true,
    args_override_self = true
)]
struct Cli {
    #[command(subcommand)]
    sub: Option<Sub>,
    #[command(flatten)]
    run: RunArgs,
}

/// A run's options (see `options::help` for what each does).
#[derive(Args, Debug)]
struct RunArgs {
    #[arg(long, value_name = "LEVEL", value_parser = log_level)]
    log: Option<String>,
    #[arg(long, value_name = "PATH", value_parser = non_empty())]
    log_file: Option<OsString>,
    #[arg(long, value_name = "PATH", value_parser = non_empty())]
    report: Option<OsString>,
    #[arg(long, value_name = "PATH", value_parser = non_empty())]
    trace: Option<OsString>,
    #[arg(long, value_name = "N", value_parser = exit_code)]
    leak_exitcode: Option<u8>,
    #[arg(long)]
    fail_on_leak: bool,
    #[arg(long, value_name = "FILE", value_parser = non_empty())]
    suppress: Option<OsString>,
    #[arg(long)]
    no_default_suppressions: bool,
    #[arg(long)]
    list_default_suppressions: bool,
    #[arg(long)]
    backtrace: bool,
    #[arg(long)]
    check_datapath: bool,
    #[arg(long)]
    check_abort: bool,
    #[arg(long)]
    check_inflight: bool,
    #[arg(long)]
    sim: bool,
    /// Empty is meaningful: a sim with no device.
    #[arg(long, value_name = "LIST", value_parser = OsStringValueParser::new())]
    sim_devices: Option<OsString>,
    #[arg(long, value_name = "PATH", value_parser = non_empty())]
    library: Option<OsString>,
    #[arg(long, value_name = "PATH", value_parser = non_empty())]
    shim: Option<OsString>,
    #[arg(long, value_name = "DIR", value_parser = non_empty())]
    sim_dir: Option<OsString>,
    /// Taken out of the arguments before the run goes into the VM
    /// (`vm::strip`); accepted here so that it parses.
    #[arg(long)]
    vm: bool,
    #[arg(short, long)]
    quiet: bool,
    #[arg(long, value_name = "RULES", value_parser = faults)]
    faults: Option<String>,
    #[arg(long)]
    fault_sweep: bool,
    #[arg(short = 'j', long, value_name = "N", value_parser = positive)]
    jobs: Option<u64>,
    #[arg(long, value_name = "LIST", value_parser = sweep_verbs)]
    sweep_verbs: Option<VerbList>,
    #[arg(long)]
    sweep_sites: bool,
    #[arg(long)]
    sweep_infallible: bool,
    #[arg(long, value_name = "S", value_parser = positive)]
    sweep_timeout: Option<u64>,
    #[arg(long, value_name = "PATH", value_parser = non_empty())]
    sweep_json: Option<OsString>,
    #[arg(long, value_name = "COMMAND", value_parser = non_empty())]
    peer: Option<OsString>,
    /// Anything that is no option before `--`: refused with a message
    /// that says where the program goes.
    #[arg(hide = true, allow_hyphen_values = true, trailing_var_arg = true)]
    stray: Vec<OsString>,
}

#[derive(Subcommand, Debug)]
enum Sub {
    /// `ibv-shim trace`.
    #[command(override_help = crate::trace::HELP)]
    Trace(TraceArgs),
    /// `ibv-shim report merge`.
    #[command(override_help = crate::merge::help(), subcommand_required = true)]
    Report {
        #[command(subcommand)]
        what: ReportSub,
    },
}

#[derive(Args, Debug)]
struct TraceArgs {
    #[arg(long, value_name = "FORMAT", value_parser = trace_format)]
    format: Option<Format>,
    #[arg(long, conflicts_with_all = ["format", "per_qp"])]
    stats: bool,
    #[arg(long, conflicts_with = "format")]
    per_qp: bool,
    files: Vec<OsString>,
}

#[derive(Subcommand, Debug)]
enum ReportSub {
    #[command(override_help = crate::merge::help())]
    Merge(MergeArgs),
}

#[derive(Args, Debug)]
struct MergeArgs {
    #[arg(long, value_name = "FORMAT", value_parser = merge_format)]
    format: Option<bool>,
    #[arg(short = 'o', long, value_name = "FILE", value_parser = non_empty())]
    output: Option<OsString>,
    #[arg(long)]
    exit_zero: bool,
    files: Vec<PathBuf>,
}

/// `--sweep-verbs`' list (one value, comma-separated).
#[derive(Clone, Debug)]
struct VerbList(Vec<String>);

/// What a value parser found wrong, worded for the message that names the
/// option.
#[derive(Debug)]
enum Bad {
    /// `OPTION needs a non-empty value: OPTION VALUE_NAME`.
    Empty,
    /// `OPTION "VALUE": why`.
    Value(String),
    /// `OPTION: why` (the text quotes what is wrong itself).
    Whole(String),
}

impl std::fmt::Display for Bad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bad::Empty => f.write_str("needs a non-empty value"),
            Bad::Value(why) | Bad::Whole(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for Bad {}

fn non_empty() -> impl TypedValueParser<Value = OsString> {
    OsStringValueParser::new().try_map(|v| match v.is_empty() {
        true => Err(Bad::Empty),
        false => Ok(v),
    })
}

/// `--log LEVEL`: one of [`LOG_LEVELS`], in any case; kept lower case.
fn log_level(v: &str) -> Result<String, Bad> {
    let level = v.to_ascii_lowercase();
    match LOG_LEVELS.contains(&level.as_str()) {
        true => Ok(level),
        false => Err(Bad::Value(format!(
            "the level is one of {}",
            LOG_LEVELS.join("|")
        ))),
    }
}

/// `--leak-exitcode N`: 1..=255 (0 would make a leaking run look like a
/// clean one; an exit status has 8 bits).
fn exit_code(v: &str) -> Result<u8, Bad> {
    match v.trim().parse::<u32>() {
        Ok(n @ 1..=255) => Ok(n as u8),
        _ => Err(Bad::Value("N is a number from 1 to 255".into())),
    }
}

/// `--faults RULES`, checked by the shim's own grammar.
fn faults(v: &str) -> Result<String, Bad> {
    match v.is_empty() {
        true => Err(Bad::Empty),
        false => fault_rules::parse(v)
            .map(|_| v.to_string())
            .map_err(Bad::Whole),
    }
}

fn positive(v: &str) -> Result<u64, Bad> {
    match v.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Bad::Value("a whole number above 0".into())),
    }
}

fn sweep_verbs(v: &str) -> Result<VerbList, Bad> {
    let verbs: Vec<String> = v.split(',').map(|x| x.trim().to_string()).collect();
    match verbs
        .iter()
        .find(|x| *x != "all" && *x != "cm_event" && fault_rules::verb(x).is_none())
    {
        Some(bad) => Err(Bad::Whole(format!(
            "{bad:?} is not a verb the shim can make fail ({}, cm_event or all)",
            fault_rules::verb_names().collect::<Vec<_>>().join(",")
        ))),
        None => Ok(VerbList(verbs)),
    }
}

fn trace_format(v: &str) -> Result<Format, Bad> {
    match v {
        "text" => Ok(Format::Text),
        "chrome" => Ok(Format::Chrome),
        _ => Err(Bad::Value("text or chrome".into())),
    }
}

/// `--format` of a merge: is it JUnit?
fn merge_format(v: &str) -> Result<bool, Bad> {
    match v {
        "text" => Ok(false),
        "junit" => Ok(true),
        _ => Err(Bad::Value("text or junit".into())),
    }
}

/// Which command a usage error is about: its usage line follows the
/// message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Of {
    Run,
    Trace,
    Merge,
}

/// What the command line asks for.
#[derive(Debug)]
pub enum Parsed {
    /// A run, or the top-level help, version or suppressions.
    Run(Command),
    Trace(TraceOptions),
    Merge(MergeOptions),
    /// A subcommand's `--help`: print it on stdout and exit 0.
    Print(String),
    /// A usage error (exit status 2).
    Usage(Of, String),
}

/// Parses the arguments after the launcher's own name.
pub fn parse(args: Vec<OsString>) -> Parsed {
    let of = match args.first().and_then(|a| a.to_str()) {
        Some("trace") => Of::Trace,
        Some("report") => Of::Merge,
        _ => Of::Run,
    };
    // A run's program and arguments are not clap's to see.
    let (options, program) = match of {
        Of::Run => match args.iter().position(|a| a == "--") {
            Some(at) => (args[..at].to_vec(), Some(args[at + 1..].to_vec())),
            None => (args, None),
        },
        _ => (args, None),
    };
    let cli = match Cli::try_parse_from(std::iter::once(OsString::from("ibv-shim")).chain(options))
    {
        Ok(cli) => cli,
        Err(e) => {
            return match (e.kind(), of) {
                (ErrorKind::DisplayHelp, Of::Run) => Parsed::Run(Command::Help),
                (ErrorKind::DisplayVersion, _) => Parsed::Run(Command::Version),
                (ErrorKind::DisplayHelp, _) => Parsed::Print(e.render().to_string()),
                _ => Parsed::Usage(of, message(&e, of)),
            }
        }
    };
    match cli.sub {
        Some(Sub::Trace(t)) => match t.files.is_empty() {
            true => Parsed::Usage(Of::Trace, "no trace file given".into()),
            false => Parsed::Trace(TraceOptions {
                format: match (t.stats, t.per_qp) {
                    (true, _) => Format::Stats,
                    (_, true) => Format::PerQp,
                    _ => t.format.unwrap_or(Format::Text),
                },
                files: t.files,
            }),
        },
        Some(Sub::Report {
            what: ReportSub::Merge(m),
        }) => match m.files.is_empty() {
            true => Parsed::Usage(Of::Merge, "no report files".into()),
            false => Parsed::Merge(MergeOptions {
                junit: m.format.unwrap_or(false),
                output: m.output.map(PathBuf::from),
                exit_zero: m.exit_zero,
                files: m.files,
            }),
        },
        None => match run(cli.run, program) {
            Ok(c) => Parsed::Run(c),
            Err(UsageError(m)) => Parsed::Usage(Of::Run, m),
        },
    }
}

fn usage(msg: impl Into<String>) -> UsageError {
    UsageError(msg.into())
}

fn run(a: RunArgs, program: Option<Vec<OsString>>) -> Result<Command, UsageError> {
    if a.list_default_suppressions {
        return Ok(Command::ListDefaultSuppressions);
    }
    if let Some(s) = a.stray.first() {
        let text = s.to_string_lossy();
        return Err(usage(match text.starts_with('-') && text != "-" {
            true => format!("unknown option {text} (see ibv-shim --help; the program goes after `--`)"),
            false => format!(
                "{text:?} is not an option: put the program after `--`: ibv-shim [options] -- {text} ..."
            ),
        }));
    }
    let o = Options {
        log: a.log,
        log_file: a.log_file,
        report: a.report,
        trace: a.trace,
        leak_exitcode: a
            .leak_exitcode
            .or(a.fail_on_leak.then_some(DEFAULT_LEAK_EXITCODE)),
        suppress: a.suppress,
        backtrace: a.backtrace,
        check_datapath: a.check_datapath || a.check_abort || a.check_inflight,
        check_abort: a.check_abort,
        check_inflight: a.check_inflight,
        no_default_suppressions: a.no_default_suppressions,
        sim: a.sim || a.sim_devices.is_some() || a.sim_dir.is_some(),
        sim_devices: a.sim_devices,
        library: a.library,
        shim: a.shim.map(PathBuf::from),
        sim_dir: a.sim_dir.map(PathBuf::from),
        quiet: a.quiet,
        faults: a.faults,
        sweep: Sweep {
            enabled: a.fault_sweep,
            jobs: a.jobs.map(|n| n as usize),
            verbs: a.sweep_verbs.map(|v| v.0),
            sites: a.sweep_sites,
            timeout: a.sweep_timeout,
            json: a.sweep_json.map(PathBuf::from),
            infallible: a.sweep_infallible,
            peer: a.peer.map(|p| {
                use std::os::unix::ffi::OsStrExt;
                p.as_bytes()
                    .split(|b| b.is_ascii_whitespace())
                    .filter(|w| !w.is_empty())
                    .map(|w| OsString::from(std::ffi::OsStr::from_bytes(w)))
                    .collect()
            }),
        },
        program: OsString::new(),
        args: Vec::new(),
    };
    crate::sweep::validate(&o)?;
    let Some(mut program) = program else {
        return Err(usage(
            "missing `--` and the program to run: ibv-shim [options] -- PROGRAM [ARGS...]",
        ));
    };
    if program.first().is_none_or(|p| p.is_empty()) {
        return Err(usage(
            "no program after `--`: ibv-shim [options] -- PROGRAM [ARGS...]",
        ));
    }
    let args = program.split_off(1);
    Ok(Command::Run(Box::new(Options {
        program: program.remove(0),
        args,
        ..o
    })))
}

/// A clap error as the launcher words it: the option, and what is wrong.
fn message(e: &clap::Error, of: Of) -> String {
    let context = |k| e.get(k).map(|v| v.to_string()).unwrap_or_default();
    // `--log <LEVEL>`: the option and its value's name.
    let arg = context(ContextKind::InvalidArg);
    let (name, value_name) = match arg.split_once(' ') {
        Some((n, v)) => (n.to_string(), v.trim_matches(['<', '>', '.']).to_string()),
        None => (arg.clone(), String::new()),
    };
    let value = context(ContextKind::InvalidValue);
    match e.kind() {
        ErrorKind::UnknownArgument => match of {
            Of::Run => {
                format!("unknown option {name} (see ibv-shim --help; the program goes after `--`)")
            }
            _ => format!("unknown option {name}"),
        },
        ErrorKind::InvalidValue if value.is_empty() => {
            format!("{name} needs a value: {name} {value_name}")
        }
        ErrorKind::ValueValidation => {
            let bad = std::error::Error::source(e).and_then(|s| s.downcast_ref::<Bad>());
            match bad {
                Some(Bad::Empty) => format!("{name} needs a non-empty value: {name} {value_name}"),
                Some(Bad::Whole(why)) => format!("{name}: {why}"),
                Some(Bad::Value(why)) => format!("{name} {value:?}: {why}"),
                None => plain(e),
            }
        }
        ErrorKind::MissingSubcommand
        | ErrorKind::InvalidSubcommand
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            if of == Of::Merge =>
        {
            "the report subcommand is `merge`".into()
        }
        _ => plain(e),
    }
}

/// clap's own first line, less its `error: ` and styling.
fn plain(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let line = text.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    /// Every option the parser takes, each command's.
    fn longs() -> Vec<(String, String)> {
        fn walk(c: &clap::Command, path: &str, out: &mut Vec<(String, String)>) {
            for a in c.get_arguments().filter(|a| !a.is_hide_set()) {
                if let Some(l) = a.get_long() {
                    if l != "help" && l != "version" {
                        out.push((path.to_string(), format!("--{l}")));
                    }
                }
            }
            for s in c.get_subcommands() {
                walk(s, &format!("{path} {}", s.get_name()), out);
            }
        }
        let mut out = Vec::new();
        walk(&Cli::command(), "ibv-shim", &mut out);
        out
    }

    #[test]
    fn the_definition_is_sound() {
        Cli::command().debug_assert();
    }

    /// The help texts are hand-written; each names every option its
    /// command parses, and every option they name parses.
    #[test]
    fn each_help_names_the_options_its_command_takes_and_no_other() {
        let helps = [
            ("ibv-shim", crate::options::help()),
            ("ibv-shim trace", crate::trace::HELP.to_string()),
            ("ibv-shim report merge", crate::merge::help()),
        ];
        let all = longs();
        for (path, option) in &all {
            let (_, help) = helps.iter().find(|(p, _)| p == path).unwrap();
            let named = help
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .any(|w| w == option);
            assert!(named, "{path} --help does not name {option}");
        }
        for (path, help) in &helps {
            for w in help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')) {
                if w.starts_with("--") && w.len() > 2 && w != "--help" && w != "--version" {
                    assert!(
                        all.iter().any(|(_, o)| o == w),
                        "{path} --help names {w}, which no command takes"
                    );
                }
            }
        }
    }

    #[test]
    fn each_command_has_help_and_the_texts_are_the_hand_written_ones() {
        for (args, text) in [
            (&["trace", "--help"][..], crate::trace::HELP.to_string()),
            (&["report", "merge", "--help"], crate::merge::help()),
            (&["report", "merge", "-h"], crate::merge::help()),
            (&["report", "--help"], crate::merge::help()),
        ] {
            match parse(os(args)) {
                Parsed::Print(t) => assert_eq!(t.trim_end(), text.trim_end(), "{args:?}"),
                other => panic!("{args:?}: {other:?}"),
            }
        }
        assert!(matches!(parse(os(&["-h"])), Parsed::Run(Command::Help)));
        assert!(matches!(parse(os(&["-V"])), Parsed::Run(Command::Version)));
    }

    #[test]
    fn subcommands_take_both_value_forms() {
        for args in [
            &["trace", "--format", "chrome", "f"][..],
            &["trace", "--format=chrome", "f"],
        ] {
            match parse(os(args)) {
                Parsed::Trace(t) => {
                    assert_eq!(t.format, Format::Chrome);
                    assert_eq!(t.files, ["f"]);
                }
                other => panic!("{args:?}: {other:?}"),
            }
        }
        for args in [
            &["report", "merge", "--format", "junit", "-o", "x", "a", "b"][..],
            &["report", "merge", "--format=junit", "--output=x", "a", "b"],
            &[
                "report",
                "merge",
                "--format=junit",
                "-o",
                "x",
                "--",
                "a",
                "b",
            ],
        ] {
            match parse(os(args)) {
                Parsed::Merge(m) => assert_eq!(
                    m,
                    MergeOptions {
                        junit: true,
                        output: Some("x".into()),
                        exit_zero: false,
                        files: vec!["a".into(), "b".into()],
                    },
                    "{args:?}"
                ),
                other => panic!("{args:?}: {other:?}"),
            }
        }
        match parse(os(&["trace", "--per-qp", "a", "b"])) {
            Parsed::Trace(t) => assert_eq!((t.format, t.files.len()), (Format::PerQp, 2)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn subcommand_errors_name_the_option() {
        for (args, of, says) in [
            (
                &["trace", "--bogus", "f"][..],
                Of::Trace,
                "unknown option --bogus",
            ),
            (
                &["trace", "--format", "xml", "f"],
                Of::Trace,
                "--format \"xml\": text or chrome",
            ),
            (&["trace", "--format"], Of::Trace, "--format needs a value"),
            (&["trace"], Of::Trace, "no trace file given"),
            (
                &["trace", "--stats", "--per-qp", "f"],
                Of::Trace,
                "--per-qp",
            ),
            (&["report"], Of::Merge, "the report subcommand is `merge`"),
            (&["report", "merge"], Of::Merge, "no report files"),
            (
                &["report", "merge", "--format=x", "a"],
                Of::Merge,
                "text or junit",
            ),
            (
                &["report", "merge", "-o"],
                Of::Merge,
                "--output needs a value",
            ),
            (
                &["report", "merge", "--exit-zero=1", "a"],
                Of::Merge,
                "--exit-zero",
            ),
        ] {
            match parse(os(args)) {
                Parsed::Usage(o, m) => {
                    assert_eq!(o, of, "{args:?}");
                    assert!(m.contains(says), "{args:?}: {m}");
                }
                other => panic!("{args:?}: {other:?}"),
            }
        }
    }
}
