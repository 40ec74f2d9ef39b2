//! A run's options, `ibv-shim [options] -- PROGRAM ARGS...`, and its
//! `--help`; `cli` parses them. Options take their value as the next
//! argument or after `=` (`--log debug`, `--log=debug`); a repeated
//! option's last value wins. Everything after the first `--` is the
//! program and its arguments, passed through untouched.

use std::ffi::OsString;
use std::path::PathBuf;

/// The leak exit code `--fail-on-leak` asks for when `--leak-exitcode` is
/// not given.
pub const DEFAULT_LEAK_EXITCODE: u8 = 23;

/// The shim's log levels, as `IBV_SHIM_LOG` takes them.
pub const LOG_LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// What the command line asked for.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    /// `-h` / `--help`.
    Help,
    /// `-V` / `--version`.
    Version,
    /// `--list-default-suppressions`.
    ListDefaultSuppressions,
    /// Run a program.
    Run(Box<Options>),
}

/// The options of a run.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `--log LEVEL`, lower case, one of [`LOG_LEVELS`].
    pub log: Option<String>,
    /// `--log-file PATH` (`%p` = pid).
    pub log_file: Option<OsString>,
    /// `--report PATH` (`%p` = pid).
    pub report: Option<OsString>,
    /// `--trace PATH` (`%p` = pid): the binary trace.
    pub trace: Option<OsString>,
    /// `--leak-exitcode N`, or [`DEFAULT_LEAK_EXITCODE`] from `--fail-on-leak`.
    pub leak_exitcode: Option<u8>,
    /// `--suppress FILE`.
    pub suppress: Option<OsString>,
    /// `--backtrace`.
    pub backtrace: bool,
    /// `--check-datapath`, or implied by `--check-abort`.
    pub check_datapath: bool,
    /// `--check-abort`.
    pub check_abort: bool,
    /// `--check-inflight` (implies `check_datapath`).
    pub check_inflight: bool,
    /// `--no-default-suppressions`.
    pub no_default_suppressions: bool,
    /// `--sim`, or implied by `--sim-devices` or `--sim-dir`.
    pub sim: bool,
    /// `--sim-devices LIST`.
    pub sim_devices: Option<OsString>,
    /// `--library PATH`.
    pub library: Option<OsString>,
    /// `--shim PATH`.
    pub shim: Option<PathBuf>,
    /// `--sim-dir DIR`.
    pub sim_dir: Option<PathBuf>,
    /// `-q` / `--quiet`.
    pub quiet: bool,
    /// `--faults RULES` (checked). Sets `IBV_SHIM_FAULTS`.
    pub faults: Option<String>,
    /// `--fault-sweep` and its options.
    pub sweep: crate::sweep::Sweep,
    /// The program to run, as given (a name looked up in `PATH`, or a path).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

/// A command line the launcher cannot run: a usage error (exit status 2).
#[derive(Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses the arguments after the launcher's own name, as a run (the
/// subcommands are `cli`'s too): for the tests of a run's options.
#[cfg(test)]
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command, UsageError> {
    match crate::cli::parse(args.into_iter().collect()) {
        crate::cli::Parsed::Run(c) => Ok(c),
        crate::cli::Parsed::Usage(_, m) => Err(UsageError(m)),
        other => Err(UsageError(format!("not a run: {other:?}"))),
    }
}

/// `ibv-shim --help`.
pub fn help() -> String {
    format!(
        "\
ibv-shim {version}: run a program with the RDMA verbs shim preloaded, then
summarise what it leaked (like valgrind or heaptrack, for libibverbs).

usage: ibv-shim [options] -- PROGRAM [ARGS...]
       ibv-shim report merge [--format text|junit] [-o FILE] [--exit-zero]
                             REPORT.json...
         one summary over many processes' JSON reports: leaks by creation
         site with the processes they came from; junit: one test case per
         process, a failure per leak site; exit status 23 when a report
         holds a leak (0 with --exit-zero); see ibv-shim report merge --help

The program runs as a child with the shim (libibv_shim.so) in LD_PRELOAD.
The shim logs verbs calls and audits every RDMA object the program creates;
at exit each process writes a JSON leak report, and the launcher prints a
short summary of it on stderr, then exits with the program's status.

Options (each sets an environment variable for the program; a variable no
option sets is inherited unchanged):
  --log LEVEL          the shim's log level: off|error|warn|info|debug|trace
                       (the shim's default is warn, which shows leaks).
                       Sets IBV_SHIM_LOG.
  --log-file PATH      write the shim's log to PATH instead of stderr; %p in
                       PATH becomes the pid. Sets IBV_SHIM_LOG_FILE.
  --trace PATH         record every verbs call in a binary trace (a file per
                       process: put %p in PATH); decode it with
                       `ibv-shim trace [--format chrome] [--stats] FILE...`.
                       Sets IBV_SHIM_TRACE (IBV_SHIM_TRACE_FULL=block makes
                       a full ring wait instead of dropping); a process that
                       finds PATH in use by another writes PATH.<pid>.
  --report PATH        keep the JSON leak report at PATH (%p = pid: use it
                       when the program forks, each process writes its own;
                       without %p, a process that finds another's report
                       written there since it started writes
                       NAME.<pid>.EXT instead, with a warning).
                       Sets IBV_SHIM_REPORT. Without it the launcher reads an
                       inherited IBV_SHIM_REPORT, or else has the reports
                       written to a private temporary directory
                       (ibv-shim-report.%p.json) and removes them after the
                       summary.
  --leak-exitcode N    a process that leaked exits with status N (1..255),
                       so a CI step fails on leaks. Sets IBV_SHIM_LEAK_EXITCODE.
  --fail-on-leak       the same with N = {leak} (unless --leak-exitcode is given).
  --suppress FILE      leak suppressions (by kind and creation-site module or
                       symbol), for objects kept on purpose; they are counted
                       as suppressed, not as leaks. Sets IBV_SHIM_SUPPRESS.
  --no-default-suppressions
                       report the objects libraries keep for the life of the
                       process on purpose (librdmacm's contexts and device
                       list) as leaks too; by default they are shown as
                       'kept by LIBRARY (suppressed by default)'.
                       Sets IBV_SHIM_DEFAULT_SUPPRESSIONS=0.
  --list-default-suppressions
                       print the built-in suppressions and exit.
  --backtrace          record a full backtrace at each creation, not just the
                       calling function. Sets IBV_SHIM_BACKTRACE=1.
  --check-datapath     check every posted work request (lkeys of live MRs of
                       the QP's PD, ranges, access, QP state): each violation
                       logged once per call site, counted in the report; the
                       calls still go through unchanged.
                       Sets IBV_SHIM_CHECK=datapath.
  --check-abort        the same, and abort at the first violation.
                       Sets IBV_SHIM_CHECK=datapath,abort.
  --check-inflight     the same checks, and posted work followed to its
                       completion: send buffers changed before it, receive
                       buffers reused early, MRs, QPs and CQs torn down
                       under posted work, CQ overruns.
                       Sets IBV_SHIM_CHECK=inflight (with --check-abort:
                       inflight,abort).
  --sim                run on the simulated RDMA devices (no hardware needed):
                       puts the directory of the sim's libibverbs.so.1 (see
                       --sim-dir) first in LD_LIBRARY_PATH.
  --sim-devices LIST   the simulated devices, comma-separated, each a name
                       with a family prefix, optionally =GUID (mlx5_0,rxe0,
                       mlx4_0=0002:c903:0044:5566); empty for none. The sim's
                       default is mlx5_0,mlx5_1. Implies --sim.
                       Sets IBV_SIM_DEVICES.
  --library PATH       the verbs library the shim forwards to, instead of
                       libibverbs.so.1. Sets IBV_SHIM_LIBRARY.
  --shim PATH          the shim to preload (default: libibv_shim.so next to
                       this executable, else in ../lib/ibv-shim when
                       installed). Always put first in LD_PRELOAD, before any
                       inherited entries.
  --sim-dir DIR        the directory holding the sim's libibverbs.so.1
                       (default: ../sim from this executable's directory,
                       made from libibv_sim.so next to it when missing or
                       older; installed: ../lib/ibv-shim/sim). Implies --sim.
  --vm                 run on a real kernel RDMA stack instead: Debian's own
                       kernel with Soft-RoCE (rdma_rxe, device rxe0) and the
                       RDMA CM in a QEMU micro-VM over this machine's own
                       files, read-only but for the current directory, which
                       is shared writable. The launcher runs inside with the
                       other options; output and exit status come back. Needs
                       qemu-system-x86_64, a static busybox and kmod; the
                       kernel package is fetched once with apt-get into
                       ~/.cache/ibv-shim/vm (IBV_SHIM_VM_KERNEL names an
                       unpacked one instead). Standard input is not passed.
  -q, --quiet          print no summary (errors are still printed).
  --faults RULES       make chosen verbs calls fail (checked before the program
                       starts; a wrong rule is a usage error). Sets
                       IBV_SHIM_FAULTS; docs/faults.md gives the rules, e.g.
                       ibv_reg_mr:nth=3:errno=ENOMEM,*:prob=0.01:seed=42.
  --fault-sweep        run the program once to count its injectable calls,
                       then once per call with that call failing; print a
                       table (injected call, how the run ended, crash, hang,
                       leaks) and exit 1 when a run crashed, hung or leaked.
    -j, --jobs N       runs at once (default 1).
    --sweep-verbs LIST only these verbs (comma-separated; `all`: also the
                       destroy/close verbs, left out by default; `cm_event`:
                       the connection-manager events replaced by failures).
    --sweep-sites      fail each distinct call site once, not each call.
    --sweep-infallible also fail the calls the real library cannot fail
                       (ibv_get_device_name of a listed device), left out
                       by default.
    --sweep-timeout S  a run still going after S seconds hangs (default 60).
    --sweep-json PATH  the JSON summary (default ./ibv-shim-sweep.json),
                       replaced through a temporary; a symbolic link or a
                       special file there is refused.
    --peer COMMAND     the program is one end of a client/server pair:
                       COMMAND (words split at spaces, no quoting) is the
                       other end, started first under the shim in every
                       run (the program starts once it called rdma_listen,
                       or after 5 s); both ends' calls are counted and
                       each is failed in turn, the table saying which end.
  -h, --help           print this help and exit.
  -V, --version        print the version and exit.

Options take their value as the next argument or after '=' (--log=debug).
Relative paths are made absolute, so a program that changes directory still
finds them.

Summary: one line with the number of leaked objects by kind (and how many
were suppressed), then up to 10 of them: kind, handle, device and creation
site (module:symbol+offset). A program that forks is summarised over all of
its processes' reports, and named after the program that used verbs when
that is not the one given (a wrapper: ibv-shim -- timeout 20 prog). Each
process notes its first verbs call in the launcher's private directory
(IBV_SHIM_STATUS_DIR), so one that dies before writing its report is named,
with the signal that killed it ('prog (pid N) was killed by signal 15
(SIGTERM) before writing its report'; under the launcher the shim notes
SIGTERM, SIGINT and SIGHUP where the program left them at their default).
'made no verbs calls' means that no process used verbs (or, setuid, the
shim ignored the launcher's variables). Only this run's reports are read:
each carries the run's id (IBV_SHIM_RUN), so another run writing to the
same --report directory at the same time is not counted.

Exit status:
  the program's exit status; 128+N if it was killed by signal N.
  N of --leak-exitcode / --fail-on-leak when the program leaked (the shim
      makes a leaking process exit with N; the launcher also uses N when the
      program exited 0 but one of its other processes leaked).
  2    usage error (unknown option, missing `--` or program, bad value).
  125  the launcher itself failed (shim or sim not found, temporary
       directory not created).
  126  the program was found but cannot be executed.
  127  the program was not found.

While the program runs the launcher ignores SIGINT and SIGQUIT (the terminal
sends them to the program too) and passes SIGTERM and SIGHUP on to it.
",
        version = env!("CARGO_PKG_VERSION"),
        leak = DEFAULT_LEAK_EXITCODE,
    )
}

/// The shim's built-in suppressions (the file it compiles in), printed by
/// `--list-default-suppressions`.
pub const DEFAULT_SUPPRESSIONS: &str = fault_rules::DEFAULT_SUPPRESSIONS;

/// `ibv-shim --version`.
pub fn version() -> String {
    format!("ibv-shim {}\n", env!("CARGO_PKG_VERSION"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(args: &[&str]) -> Result<Command, UsageError> {
        parse(args.iter().map(OsString::from))
    }

    fn run(args: &[&str]) -> Options {
        match parse_str(args) {
            Ok(Command::Run(o)) => *o,
            other => panic!("{args:?}: expected a run, got {other:?}"),
        }
    }

    fn err(args: &[&str]) -> String {
        match parse_str(args) {
            Err(UsageError(m)) => m,
            other => panic!("{args:?}: expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn program_and_arguments_after_the_separator_are_untouched() {
        let o = run(&["--", "prog", "--log", "-q", "--", "x"]);
        assert_eq!(o.program, "prog");
        assert_eq!(o.args, ["--log", "-q", "--", "x"]);
        assert_eq!(o.log, None);
        assert!(!o.quiet);
    }

    #[test]
    fn every_option_with_separate_and_inline_values() {
        let o = run(&[
            "--log",
            "DEBUG",
            "--log-file=/tmp/l.%p",
            "--report",
            "r.json",
            "--trace=t.%p",
            "--leak-exitcode",
            "42",
            "--suppress=s.supp",
            "--no-default-suppressions",
            "--backtrace",
            "--check-abort",
            "--sim-devices",
            "mlx5_0,rxe0",
            "--library",
            "/lib/libibverbs.so.1",
            "--shim=/x/libibv_shim.so",
            "--sim-dir",
            "/x/sim",
            "-q",
            "--",
            "prog",
        ]);
        assert_eq!(
            o,
            Options {
                log: Some("debug".into()),
                log_file: Some("/tmp/l.%p".into()),
                report: Some("r.json".into()),
                trace: Some("t.%p".into()),
                leak_exitcode: Some(42),
                suppress: Some("s.supp".into()),
                no_default_suppressions: true,
                backtrace: true,
                check_datapath: true,
                check_abort: true,
                check_inflight: false,
                sim: true,
                sim_devices: Some("mlx5_0,rxe0".into()),
                library: Some("/lib/libibverbs.so.1".into()),
                shim: Some("/x/libibv_shim.so".into()),
                sim_dir: Some("/x/sim".into()),
                quiet: true,
                faults: None,
                sweep: Default::default(),
                program: "prog".into(),
                args: vec![],
            }
        );
    }

    #[test]
    fn fail_on_leak_is_23_unless_a_code_is_given() {
        assert_eq!(run(&["--fail-on-leak", "--", "p"]).leak_exitcode, Some(23));
        assert_eq!(
            run(&["--fail-on-leak", "--leak-exitcode", "9", "--", "p"]).leak_exitcode,
            Some(9)
        );
        assert_eq!(
            run(&["--leak-exitcode=9", "--fail-on-leak", "--", "p"]).leak_exitcode,
            Some(9)
        );
        assert_eq!(run(&["--", "p"]).leak_exitcode, None);
    }

    #[test]
    fn the_last_of_a_repeated_option_wins() {
        assert_eq!(
            run(&["--log", "info", "--log=trace", "--", "p"])
                .log
                .as_deref(),
            Some("trace")
        );
    }

    #[test]
    fn sim_and_quiet_forms() {
        let o = run(&["--sim", "--quiet", "--", "p"]);
        assert!(o.sim && o.quiet && o.sim_devices.is_none());
        // No device at all is a sim setting of its own.
        let o = run(&["--sim-devices", "", "--", "p"]);
        assert!(o.sim);
        assert_eq!(o.sim_devices.as_deref(), Some("".as_ref()));
    }

    #[test]
    fn help_and_version() {
        assert_eq!(parse_str(&["--help"]), Ok(Command::Help));
        assert_eq!(parse_str(&["-h", "--", "p"]), Ok(Command::Help));
        assert_eq!(parse_str(&["--log", "info", "-V"]), Ok(Command::Version));
        assert_eq!(parse_str(&["--version"]), Ok(Command::Version));
    }

    #[test]
    fn usage_errors_say_what_is_wrong() {
        assert!(err(&[]).contains("missing `--`"));
        assert!(err(&["--sim"]).contains("missing `--`"));
        assert!(err(&["--"]).contains("no program"));
        assert!(err(&["--", ""]).contains("no program"));
        assert!(err(&["prog"]).contains("put the program after `--`"));
        assert!(err(&["--frobnicate", "--", "p"]).contains("unknown option --frobnicate"));
        assert!(err(&["-x", "--", "p"]).contains("unknown option -x"));
        assert!(err(&["--log", "loud", "--", "p"]).contains("off|error|warn|info|debug|trace"));
        assert!(err(&["--log"]).contains("--log needs a value"));
        assert!(err(&["--log", "--", "p"]).contains("--log needs a value"));
        assert!(err(&["--report=", "--", "p"]).contains("non-empty"));
        assert!(err(&["--sim=yes", "--", "p"]).contains("--sim"));
        assert!(err(&["--report", "--", "p"]).contains("--report needs a value"));
        for bad in ["0", "256", "-1", "x", "1.5", ""] {
            let m = err(&["--leak-exitcode", bad, "--", "p"]);
            assert!(
                m.contains("1 to 255") || m.contains("non-empty"),
                "{bad}: {m}"
            );
        }
    }

    #[test]
    fn help_mentions_every_option_and_variable() {
        let h = help();
        for word in [
            "--log ",
            "--log-file",
            "--report",
            "--leak-exitcode",
            "--fail-on-leak",
            "--suppress",
            "--no-default-suppressions",
            "--list-default-suppressions",
            "IBV_SHIM_DEFAULT_SUPPRESSIONS",
            "--backtrace",
            "--check-datapath",
            "--check-abort",
            "--check-inflight",
            "IBV_SHIM_CHECK",
            "--sim ",
            "--sim-devices",
            "--library",
            "--shim",
            "--sim-dir",
            "--vm ",
            "IBV_SHIM_VM_KERNEL",
            "--quiet",
            "--help",
            "--version",
            "IBV_SHIM_LOG",
            "IBV_SHIM_LOG_FILE",
            "IBV_SHIM_TRACE",
            "--trace",
            "IBV_SHIM_REPORT",
            "IBV_SHIM_LEAK_EXITCODE",
            "IBV_SHIM_SUPPRESS",
            "IBV_SHIM_BACKTRACE",
            "IBV_SIM_DEVICES",
            "IBV_SHIM_LIBRARY",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "Exit status",
            "127",
            "126",
        ] {
            assert!(h.contains(word), "--help does not mention {word}");
        }
        assert!(h.lines().all(|l| l.len() <= 80), "--help fits 80 columns");
    }
}
