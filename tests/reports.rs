//! Leak reports people can act on and the JSON report through
//! the shared model: the `SUMMARY:` line, creation sites
//! resolved to file and line (or `module+0xoffset (BuildId: ..)`), the
//! device's vendor, and `ibv-shim report merge`.
//!
//! `tests/c/reports/leaky.c` is compiled against the real
//! `<infiniband/verbs.h>` and run on the sim with the shim preloaded.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::*;
use serde_json::Value;

fn source() -> PathBuf {
    repo_dir().join("tests/c/reports/leaky.c")
}

/// The program, built with debug information (`cc` adds `-g`) or without.
fn leaky(debug: bool) -> PathBuf {
    let args: &[&str] = match debug {
        true => &["-libverbs"],
        false => &["-g0", "-libverbs"],
    };
    cc(
        if debug { "leaky" } else { "leaky_nodebug" },
        &[&source()],
        args,
    )
}

/// The line of `leaky.c` that carries `marker`.
fn line_of(marker: &str) -> usize {
    std::fs::read_to_string(source())
        .unwrap()
        .lines()
        .position(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("no {marker} in leaky.c"))
        + 1
}

/// One run of a program under the shim on the sim.
struct Run {
    out: Output,
    log: String,
    report: Option<Value>,
    _dir: TempDir,
}

impl Run {
    /// The text report lists the PD with `want` in its line.
    fn assert_pd_line(&self, want: &str) {
        assert!(
            self.log
                .lines()
                .any(|l| l.contains("  pd 0x") && l.contains(want)),
            "no pd line with {want:?}\n{}",
            self.log
        );
    }
}

fn shim_run(prog: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let dir = TempDir::new("reports");
    let mut cmd = Command::new(prog);
    cmd.args(args);
    for var in [
        "IBV_SHIM_LOG",
        "IBV_SHIM_LIBRARY",
        "IBV_SHIM_SUPPRESS",
        "IBV_SHIM_LEAK_EXITCODE",
        "IBV_SHIM_BACKTRACE",
        "IBV_SIM_DEVICES",
    ] {
        cmd.env_remove(var);
    }
    preload_shim(&mut cmd)
        .env("LD_LIBRARY_PATH", sim_dir())
        .env("IBV_SHIM_LOG_FILE", dir.join("log"))
        .env("IBV_SHIM_REPORT", dir.join("report.json"))
        .envs(env.iter().copied());
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", describe(&cmd, &out));
    let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
    let report = std::fs::read_to_string(dir.join("report.json"))
        .ok()
        .map(|t| serde_json::from_str(&t).unwrap_or_else(|e| panic!("not JSON: {e}\n{t}")));
    Run {
        out,
        log,
        report,
        _dir: dir,
    }
}

/// The exit report ends with one `SUMMARY: ibv-shim:` line naming kinds,
/// counts and contexts; a process that leaked nothing has none.
#[test]
fn the_text_report_ends_with_a_summary_line() {
    let r = shim_run(&leaky(true), &["mr", "2"], &[]);
    let lines: Vec<&str> = r.log.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("SUMMARY: ibv-shim:"))
        .unwrap_or_else(|| panic!("no SUMMARY line\n{}", r.log));
    let summary = lines[at].split("WARN ").nth(1).unwrap();
    assert_eq!(
        summary, "SUMMARY: ibv-shim: 4 objects leaked (1 context, 1 pd, 2 mr) in 1 context.",
        "{}",
        r.log
    );
    // It is the report's last line.
    assert!(
        lines[at + 1..].iter().all(|l| !l.contains(" WARN ")),
        "{}",
        r.log
    );
    let clean = shim_run(&leaky(true), &["nothing"], &[]);
    assert_eq!(stdout(&clean.out), "done nothing\n");
    assert!(!clean.log.contains("SUMMARY"), "{}", clean.log);
}

/// The JSON report, as the shim streams it, reads back with the report
/// model's own types, one object a line.
#[test]
fn the_json_report_reads_with_the_report_model() {
    let r = shim_run(&leaky(true), &["mr", "3"], &[]);
    let dir = r._dir.path();
    let text = std::fs::read_to_string(dir.join("report.json")).unwrap();
    let doc: report_model::Report = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("not the model's report: {e}\n{text}"));
    assert!(doc.leaked);
    assert_eq!(doc.truncated, None);
    assert_eq!(doc.totals.get(report_model::Kind::Mr), 3);
    assert_eq!(doc.objects.len(), 5, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5 + 2, "{text}");
    assert!(
        lines[1..6].iter().all(|l| l.starts_with("{\"kind\":")),
        "{text}"
    );
    assert_eq!(r.report.as_ref().unwrap()["pid"], doc.pid);
}

/// `readelf -n`'s build ID of `prog`.
fn readelf_build_id(prog: &Path) -> String {
    let out = run(Command::new("readelf").arg("-n").arg(prog));
    stdout(&out)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap_or_else(|| panic!("no build ID in readelf -n {}", prog.display()))
        .to_string()
}

/// The object of `kind` in a report.
fn object<'a>(report: &'a Value, kind: &str) -> &'a Value {
    report["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {report}"))
}

/// Built with `-g`, the creating call is named by function, file and line,
/// in the log and in the JSON.
#[test]
fn a_site_with_debug_information_has_file_and_line() {
    let prog = leaky(true);
    let r = shim_run(&prog, &["pd"], &[]);
    let report = r.report.as_ref().unwrap();
    let created = &object(report, "pd")["created"];
    let line = line_of("LINE_PD");
    assert_eq!(created["function"], "main", "{created}");
    assert_eq!(created["line"], line, "{created}");
    assert!(
        created["file"]
            .as_str()
            .unwrap()
            .ends_with("tests/c/reports/leaky.c"),
        "{created}"
    );
    assert_eq!(created["build_id"], readelf_build_id(&prog).as_str());
    let want = format!("leaky.c:{line}) in {}", prog.display());
    r.assert_pd_line(&want);
}

/// Built without debug information (and without `-rdynamic`: no symbol
/// either), the site is `module+0xoffset (BuildId: ..)` as LeakSanitizer
/// prints it: the offset falls inside `main` (per `nm`), the build ID is
/// `readelf -n`'s.
#[test]
fn a_site_without_debug_information_has_module_offset_and_build_id() {
    let prog = leaky(false);
    let r = shim_run(&prog, &["pd"], &[]);
    let report = r.report.as_ref().unwrap();
    let created = &object(report, "pd")["created"];
    let id = readelf_build_id(&prog);
    assert_eq!(created["build_id"], id.as_str(), "{created}");
    assert_eq!(created["file"], Value::Null, "{created}");
    assert_eq!(created["line"], Value::Null, "{created}");
    assert_eq!(created["symbol"], Value::Null, "{created}");
    let offset = created["offset"].as_u64().unwrap();
    // main's range in the file, as nm -S prints it.
    let nm = stdout(&run(Command::new("nm").arg("-S").arg(&prog)));
    let (start, size) = nm
        .lines()
        .find_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 4 && w[3] == "main").then(|| {
                (
                    u64::from_str_radix(w[0], 16).unwrap(),
                    u64::from_str_radix(w[1], 16).unwrap(),
                )
            })
        })
        .unwrap_or_else(|| panic!("no main in nm -S\n{nm}"));
    assert!(
        (start..=start + size).contains(&offset),
        "offset {offset:#x} not in main [{start:#x}, +{size:#x}]"
    );
    let want = format!("{}+{offset:#x} (BuildId: {id})", prog.display());
    r.assert_pd_line(&want);
}

/// `ibv-shim report merge` over the reports of several real processes:
/// leaks grouped by creation site with counts and pids; `--format junit`
/// writes XML (checked with python3's xml.etree) with one test case per
/// process and one failure per site it leaked at.
#[test]
fn report_merge_groups_leaks_by_site_across_processes() {
    let prog = leaky(true);
    let runs = [
        shim_run(&prog, &["pd"], &[]),
        shim_run(&prog, &["mr", "2"], &[]),
        shim_run(&prog, &["mr", "3"], &[]),
        shim_run(&prog, &["nothing"], &[]),
    ];
    let pids: Vec<u64> = runs
        .iter()
        .map(|r| r.report.as_ref().unwrap()["pid"].as_u64().unwrap())
        .collect();
    let files: Vec<PathBuf> = runs.iter().map(|r| r._dir.join("report.json")).collect();
    let dir = TempDir::new("merge");
    let launcher = target_dir().join("ibv-shim");

    let out = run(Command::new(&launcher)
        .args(["report", "merge"])
        .args(&files));
    // Leaks: the leak exit code.
    assert_eq!(out.status.code(), Some(23), "{}", stderr(&out));
    let text = stdout(&out);
    let (pd_line, mr_line) = (line_of("LINE_PD"), line_of("LINE_MR"));
    // 3 contexts + 3 PDs + 5 MRs, at three sites: the open (one line
    // before the PD's), the PD's and the MR's.
    assert!(
        text.starts_with("ibv-shim: 4 reports, 3 leaked: 11 objects at 3 sites\n"),
        "{text}"
    );
    let mr = "ibv-shim:   5 (5 mr) at main (";
    let at = text.find(mr).unwrap_or_else(|| panic!("{text}"));
    assert!(text[at..]
        .lines()
        .next()
        .unwrap()
        .contains(&format!("leaky.c:{mr_line})")));
    let from = text[at..].lines().nth(1).unwrap();
    let name = prog.file_name().unwrap().to_string_lossy();
    let (p1, p2) = (pids[1].min(pids[2]), pids[1].max(pids[2]));
    let (n1, n2) = if pids[1] < pids[2] { (2, 3) } else { (3, 2) };
    assert_eq!(
        from,
        format!("ibv-shim:     from pid {p1} ({name}): {n1}, pid {p2} ({name}): {n2}"),
        "{text}"
    );
    assert!(text.contains("ibv-shim:   3 (3 pd) at main ("), "{text}");
    assert!(
        text.contains("ibv-shim:   3 (3 context) at main ("),
        "{text}"
    );
    assert!(text.contains(&format!("leaky.c:{pd_line})")), "{text}");

    let xml = dir.join("leaks.xml");
    let out = run(Command::new(&launcher)
        .args(["report", "merge", "--exit-zero", "--format", "junit", "-o"])
        .arg(&xml)
        .args(&files));
    assert!(out.status.success(), "{}", stderr(&out));
    let script = r#"
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suite = root.find("testsuite")
print("suite", suite.get("tests"), suite.get("failures"))
for case in suite.findall("testcase"):
    fails = case.findall("failure")
    print("case", case.get("name").rsplit("pid ", 1)[1].rstrip(")"), len(fails),
          sum(int(f.get("message").split()[0]) for f in fails))
"#;
    let out = run(Command::new("python3").arg("-c").arg(script).arg(&xml));
    assert!(out.status.success(), "{}", stderr(&out));
    let want = format!(
        "suite 4 3\ncase {} 2 2\ncase {} 3 4\ncase {} 3 5\ncase {} 0 0\n",
        pids[0], pids[1], pids[2], pids[3]
    );
    assert_eq!(stdout(&out), want);

    // A file that is not a report: named, status 1, the rest still merged.
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "{\"pid\": 1}").unwrap();
    let out = run(Command::new(&launcher)
        .args(["report", "merge"])
        .arg(&bad)
        .arg(&files[0]));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("cannot read the report"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).starts_with("ibv-shim: 1 reports, 1 leaked: 2 objects"));
}

/// `report merge --help` explains it and its exit status; a clean merge
/// exits 0, leaks 23 unless `--exit-zero`.
#[test]
fn report_merge_has_help_and_an_exit_status() {
    let launcher = target_dir().join("ibv-shim");
    let out = run(Command::new(&launcher).args(["report", "merge", "--help"]));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let help = stdout(&out);
    for word in [
        "usage: ibv-shim report merge",
        "--format",
        "-o",
        "--exit-zero",
        "Exit status",
        "23",
    ] {
        assert!(help.contains(word), "{word} not in:\n{help}");
    }
    let prog = leaky(true);
    let clean = shim_run(&prog, &["nothing"], &[]);
    let leak = shim_run(&prog, &["pd"], &[]);
    let merge = |args: &[&str], files: &[&Run]| {
        run(Command::new(&launcher)
            .args(["report", "merge"])
            .args(args)
            .args(files.iter().map(|r| r._dir.join("report.json"))))
    };
    assert_eq!(merge(&[], &[&clean]).status.code(), Some(0));
    assert_eq!(merge(&[], &[&clean, &leak]).status.code(), Some(23));
    assert_eq!(
        merge(&["--exit-zero"], &[&clean, &leak]).status.code(),
        Some(0)
    );
}

/// Hostile inputs and outputs: a FIFO or a device given as a report, or
/// as `-o`, is refused at once (never waited on, never read without end);
/// a symbolic link at `-o` is refused and its target left alone; another
/// schema is refused by name; control characters of report fields reach
/// the text escaped.
#[test]
fn report_merge_refuses_what_is_not_a_report_or_a_file_to_replace() {
    let launcher = target_dir().join("ibv-shim");
    let prog = leaky(true);
    let good = shim_run(&prog, &["pd"], &[]);
    let good_file = good._dir.join("report.json");
    let dir = TempDir::new("merge-hostile");
    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);

    for (input, says) in [
        (fifo.as_path(), "not a regular file: a FIFO"),
        (
            Path::new("/dev/zero"),
            "not a regular file: a character device",
        ),
    ] {
        let out = run(Command::new(&launcher)
            .args(["report", "merge", "--exit-zero"])
            .arg(input)
            .arg(&good_file));
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!(
                "cannot read the report {}: {says}",
                input.display()
            )),
            "{}",
            stderr(&out)
        );
        // The others are still merged.
        assert!(
            stdout(&out).starts_with("ibv-shim: 1 reports, 1 leaked"),
            "{}",
            stdout(&out)
        );
    }

    // -o: a FIFO, a device, a link to someone's file.
    let victim = dir.join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let link = dir.join("out.txt");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    for (output, says) in [
        (fifo.as_path(), "it is a FIFO, not a regular file"),
        (
            Path::new("/dev/null"),
            "it is a character device, not a regular file",
        ),
        (
            link.as_path(),
            "it is a symbolic link, which is not followed",
        ),
    ] {
        let out = run(Command::new(&launcher)
            .args(["report", "merge", "-o"])
            .arg(output)
            .arg(&good_file));
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("cannot write {}: {says}", output.display())),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    // A regular file at -o is replaced whole.
    let out_file = dir.join("merged.txt");
    std::fs::write(
        &out_file,
        "old contents, longer than the new ones will be ".repeat(100),
    )
    .unwrap();
    let out = run(Command::new(&launcher)
        .args(["report", "merge", "--exit-zero", "-o"])
        .arg(&out_file)
        .arg(&good_file));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::read_to_string(&out_file)
        .unwrap()
        .starts_with("ibv-shim: 1 reports, 1 leaked"));

    // Another schema, by name.
    let text = std::fs::read_to_string(&good_file).unwrap();
    let other = dir.join("other.json");
    std::fs::write(
        &other,
        text.replacen("ibv-shim/leak-report/1", "ibv-shim/leak-report/7", 1),
    )
    .unwrap();
    let out = run(Command::new(&launcher)
        .args(["report", "merge"])
        .arg(&other));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("its schema \"ibv-shim/leak-report/7\" is not one this ibv-shim reads"),
        "{}",
        stderr(&out)
    );

    // Escape sequences in the program's name and a module's path.
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    doc["program"] = "/bin/\u{1b}]0;owned\u{7}x".into();
    doc["objects"][0]["created"]["module"] = "/lib/m\u{1b}[2J\nibv-shim: 0 reports".into();
    doc["objects"][0]["created"]["file"] = Value::Null;
    doc["objects"][0]["created"]["line"] = Value::Null;
    let evil = dir.join("evil.json");
    std::fs::write(&evil, doc.to_string()).unwrap();
    let out = run(Command::new(&launcher)
        .args(["report", "merge", "--exit-zero"])
        .arg(&evil));
    assert!(out.status.success(), "{}", stderr(&out));
    let shown = stdout(&out);
    assert!(
        !shown.chars().any(|c| c.is_control() && c != '\n'),
        "{shown:?}"
    );
    assert!(
        shown.contains("\\x1b[2J\\x0aibv-shim: 0 reports"),
        "{shown}"
    );
    assert!(shown.contains("(\\x1b]0;owned\\x07x)"), "{shown}");
}

/// The device carries its vendor, from the driver family or the GUID's
/// OUI: in the report's text, in the debug log's device text, and in the
/// JSON.
#[test]
fn the_device_carries_its_vendor() {
    for (device, vendor) in [
        ("mlx5_0", "NVIDIA/Mellanox"),
        ("bnxt_re0", "Broadcom"),
        ("rxe0", "soft-RoCE (rxe)"),
        ("hns_0", "Huawei"),
    ] {
        let r = shim_run(
            &leaky(true),
            &["pd"],
            &[("IBV_SIM_DEVICES", device), ("IBV_SHIM_LOG", "debug")],
        );
        let report = r.report.as_ref().unwrap();
        assert_eq!(object(report, "pd")["vendor"], vendor, "{report}");
        assert!(
            r.log
                .lines()
                .any(|l| l.contains(&format!("on {device} (guid "))
                    && l.contains(&format!(") [{vendor}]"))),
            "{device}: no vendor in the report text\n{}",
            r.log
        );
        assert!(
            r.log
                .lines()
                .any(|l| l.contains("ibv_open_device(") && l.contains(&format!(" [{vendor}]"))),
            "{device}: no vendor in the log's device\n{}",
            r.log
        );
    }
}

/// `IBV_SHIM_BACKTRACE=1`: the recorded return addresses are resolved as
/// structured frames when the report is written: from the program's call
/// down (the shim's own frames left out), `function (file:line)` each, the
/// inline wrapper of verbs.h and the program's line both named.
#[test]
fn backtraces_are_structured_frames_from_the_program_s_call() {
    let r = shim_run(&leaky(true), &["mr", "1"], &[("IBV_SHIM_BACKTRACE", "1")]);
    let report = r.report.as_ref().unwrap();
    let frames = |kind: &str| -> Vec<String> {
        object(report, kind)["created"]["backtrace"]
            .as_array()
            .unwrap_or_else(|| panic!("no backtrace\n{report}"))
            .iter()
            .map(|f| f.as_str().unwrap().to_string())
            .collect()
    };
    // `function (/absolute/file:line:column)`, the path as the DWARF
    // names it (its compilation directory joined).
    let at = |f: &str, func: &str, marker: &str| {
        let rest = f.strip_prefix(&format!("{func} (/")).unwrap_or_default();
        rest.contains(&format!("tests/c/reports/leaky.c:{}:", line_of(marker)))
    };
    let pd = frames("pd");
    assert!(at(&pd[0], "main", "LINE_PD"), "{pd:?}");
    let mr = frames("mr");
    assert!(mr[0].contains("/usr/include/infiniband/verbs.h:"), "{mr:?}");
    assert!(at(&mr[1], "main", "LINE_MR"), "{mr:?}");
    for f in pd.iter().chain(&mr) {
        assert!(
            !f.contains("ibv_shim") && !f.contains("unknown"),
            "{f}: {pd:?} {mr:?}"
        );
    }
}
