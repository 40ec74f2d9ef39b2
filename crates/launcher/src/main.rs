//! `ibv-shim [options] -- PROGRAM ARGS...`: runs a program with the verbs
//! shim preloaded, then summarises its leak reports and exits with its
//! status (see `ibv-shim --help`).
//!
//! - `cli`: the whole command line, every subcommand's (clap).
//! - `options`: a run's options and `--help`.
//! - `environment`: where the shim and the sim are; the program's variables.
//! - `run`: finding and running the program, signals, its exit status.
//! - `report`: the shim's JSON reports: where they are, what they say.
//! - `summary`: the lines printed at the end, and the launcher's exit status.
//! - `sweep`: `--fault-sweep`; `reaper`: the process that watches each of
//!   its runs (a wrong `--faults` rule is refused up front by the shim's
//!   own grammar, the `fault-rules` crate).
//! - `files`: the files the launcher reads and writes (regular files only,
//!   bounded reads, writes renamed into place, links refused).
//! - `trace`: the `ibv-shim trace FILE...` subcommand (decoding trace files).
//! - `merge`: `ibv-shim report merge`, one summary over many processes' reports.
//! - `vm`: `--vm`, the same run on a real kernel RDMA stack in a micro-VM.
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

mod checks_line;
mod cli;
mod environment;
mod files;
mod merge;
mod options;
mod reaper;
mod report;
mod run;
mod status;
mod summary;
mod sweep;
mod trace;
mod vm;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use options::{Command, Options};
use report::Report;

/// A run that ends with a message from the launcher and a status.
struct Failure {
    status: i32,
    message: String,
}

impl From<environment::SetupError> for Failure {
    fn from(e: environment::SetupError) -> Failure {
        Failure {
            status: 125,
            message: format!("error: {e}"),
        }
    }
}

impl From<run::NotRun> for Failure {
    fn from(e: run::NotRun) -> Failure {
        Failure {
            status: e.status,
            message: e.message,
        }
    }
}

fn main() {
    let mut args = std::env::args_os();
    if args.next().is_some_and(|a| a == reaper::ARGV0) {
        // The fault sweep's helper that watches one run (see `reaper`).
        std::process::exit(reaper::main(args));
    }
    std::process::exit(launch(args));
}

/// Prints to stderr in one write; a closed stderr is not the launcher's
/// failure.
fn to_stderr(text: &str) {
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

fn launch(args: impl IntoIterator<Item = OsString>) -> i32 {
    let args: Vec<OsString> = args.into_iter().collect();
    let in_vm = vm::strip(&args);
    let o = match cli::parse(args) {
        cli::Parsed::Trace(t) => return trace::main(t),
        cli::Parsed::Merge(m) => return merge::main(m),
        cli::Parsed::Print(text) => {
            let _ = std::io::stdout().lock().write_all(text.as_bytes());
            return 0;
        }
        cli::Parsed::Usage(cli::Of::Trace, m) => return trace::usage(&m),
        cli::Parsed::Usage(cli::Of::Merge, m) => return merge::usage(&m),
        cli::Parsed::Run(Command::Help) => {
            let _ = std::io::stdout()
                .lock()
                .write_all(options::help().as_bytes());
            return 0;
        }
        cli::Parsed::Run(Command::Version) => {
            let _ = std::io::stdout()
                .lock()
                .write_all(options::version().as_bytes());
            return 0;
        }
        cli::Parsed::Run(Command::ListDefaultSuppressions) => {
            let _ = std::io::stdout()
                .lock()
                .write_all(options::DEFAULT_SUPPRESSIONS.as_bytes());
            return 0;
        }
        cli::Parsed::Run(Command::Run(_)) if in_vm.is_some() => {
            return match vm::run(in_vm.unwrap_or_default()) {
                Ok(status) => status,
                Err(message) => {
                    to_stderr(&format!("ibv-shim: {message}\n"));
                    125
                }
            }
        }
        cli::Parsed::Run(Command::Run(o)) => o,
        cli::Parsed::Usage(cli::Of::Run, e) => {
            to_stderr(&format!(
                "ibv-shim: {e}\nusage: ibv-shim [options] -- PROGRAM [ARGS...]   (ibv-shim --help explains the options)\n"
            ));
            return 2;
        }
    };
    match run_program(&o) {
        Ok(status) => status,
        Err(f) => {
            to_stderr(&format!("ibv-shim: {}\n", f.message));
            f.status
        }
    }
}

fn run_program(o: &Options) -> Result<i32, Failure> {
    let inherited = |k: &str| std::env::var_os(k);
    let shim = environment::find_shim(o.shim.as_deref(), environment::exe_dir)?;
    let sim_dir = match o.sim {
        true => Some(environment::find_sim_dir(
            o.sim_dir.as_deref(),
            environment::exe_dir,
        )?),
        false => None,
    };
    let program = run::resolve(&o.program, inherited("PATH").as_deref())?;
    let plan = environment::plan(
        o,
        &shim,
        sim_dir.as_deref(),
        environment::private_dir,
        inherited,
    )?;
    if o.sweep.enabled {
        let peer = match o.sweep.peer.as_ref().and_then(|p| p.first()) {
            Some(p) => Some(run::resolve(p, inherited("PATH").as_deref())?),
            None => None,
        };
        let swept = sweep::run(o, program, peer, plan.vars.clone(), &plan.private);
        plan.cleanup();
        return swept.map_err(|message| Failure {
            status: 125,
            message,
        });
    }
    let leak_exitcode = environment::leak_exitcode(o, inherited);
    let before = plan.report.before();

    let ran = match run::run(&program, &o.program, &o.args, &plan.vars) {
        Ok(r) => r,
        Err(e) => {
            plan.cleanup();
            return Err(e.into());
        }
    };
    let started = status::read(&plan.private);

    let files = plan.report.written_since(&before);
    let mut reports: Vec<Report> = Vec::new();
    let mut unreadable: Vec<(PathBuf, String)> = Vec::new();
    // Only this run's: another launcher's processes may write to the same
    // directory (the same --report, an inherited IBV_SHIM_REPORT) at the
    // same time. A report without a run id (a shim older than the launcher,
    // `--shim`) is this run's when its process noted itself in this run's
    // private directory.
    let ours = |r: &Report| match r.run.as_deref() {
        Some(run) => run == plan.run,
        None => started.iter().any(|s| Some(s.pid) == r.pid),
    };
    let files: Vec<PathBuf> = files
        .into_iter()
        .filter(|f| match Report::read(f) {
            Ok(r) if ours(&r) => {
                reports.push(r);
                true
            }
            Ok(_) => false,
            Err(why) => {
                unreadable.push((f.clone(), why));
                true
            }
        })
        .collect();
    // A process that used verbs and wrote no report, where something other
    // than a regular file is in its report's place: the shim refused it.
    let refused: Vec<(u64, String)> = started
        .iter()
        .filter(|s| !reports.iter().any(|r| r.pid == Some(s.pid)))
        .filter_map(|s| {
            let path = plan.report.path_for(s.pid);
            let why = files::check_target(&path).err()?;
            Some((s.pid, format!("{}: {why}", path.display())))
        })
        .collect();
    let leaked = reports.iter().any(Report::has_leaks);
    let exit = summary::exit_status(ran.status, leak_exitcode, leaked);
    if !o.quiet {
        let program = o.program.to_string_lossy();
        let kept = (!plan.report.is_private()).then_some(files.as_slice());
        let lines = summary::lines(&summary::Input {
            program: &program,
            reports: &reports,
            unreadable: &unreadable,
            kept,
            exit,
            leak_exitcode,
            started: &started,
            refused: &refused,
            child: ran.pid.into(),
        });
        let mut text = lines.join("\n");
        text.push('\n');
        to_stderr(&text);
    }
    plan.cleanup();
    Ok(exit.0)
}
