//! The prerequisites of the workspace's build and tests, checked before `cargo xtask dev` and
//! `cargo xtask test` run, and installed where this machine allows it.
//!
//! The embedded model (`kestrel-llama`) builds llama.cpp with cmake and a C/C++ compiler, and
//! generates its bindings with bindgen, which loads libclang; the tests run under cargo-nextest.
//!
//! The decisions — what is missing, and what to do about it on this kind of machine — are pure
//! functions ([`plan_native`], [`plan_nextest`], [`still_missing_message`]) of what was probed
//! ([`Host`], [`Native`]), so the unit tests inject machines. Only the `probe` functions and
//! [`ensure_native`] / [`ensure_nextest`] touch the system.

use std::env;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The Debian/Ubuntu packages that provide cmake, clang and libclang.
const APT_PACKAGES: [&str; 3] = ["cmake", "clang", "libclang-dev"];

/// Why the native tools are needed, as the messages say it.
const NATIVE_NEEDS: &str = "building the embedded model needs cmake, clang and libclang";

/// The command that installs cargo-nextest, as a person types it.
const NEXTEST_INSTALL: &str = "cargo install cargo-nextest --locked";

/// The operating-system families whose advice differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Os {
    /// Linux (Debian, Ubuntu, Fedora, Arch, ...).
    Linux,
    /// macOS, where the tools come from Homebrew.
    Mac,
    /// Anything else.
    Other,
}

/// A system package manager found on `PATH`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PackageManager {
    /// `apt-get` (Debian, Ubuntu): the one xtask installs with.
    Apt,
    /// `dnf` (Fedora, RHEL): named in the message only.
    Dnf,
    /// `pacman` (Arch): named in the message only.
    Pacman,
}

/// The machine: its system, who runs xtask, and what could install packages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Host {
    /// The operating-system family.
    pub os: Os,
    /// Whether xtask runs as root (`id -u` is 0).
    pub root: bool,
    /// Whether `sudo` is on `PATH`.
    pub sudo: bool,
    /// The first package manager found on `PATH`, if any.
    pub package_manager: Option<PackageManager>,
}

impl Host {
    /// Probes this machine.
    pub fn probe() -> Self {
        let path = env::var_os("PATH");
        let os = match env::consts::OS {
            "linux" => Os::Linux,
            "macos" => Os::Mac,
            _ => Os::Other,
        };
        let package_manager = [
            ("apt-get", PackageManager::Apt),
            ("dnf", PackageManager::Dnf),
            ("pacman", PackageManager::Pacman),
        ]
        .into_iter()
        .find(|(program, _)| on_path(program, path.as_deref()))
        .map(|(_, manager)| manager);
        Self {
            os,
            root: is_root(),
            sudo: on_path("sudo", path.as_deref()),
            package_manager,
        }
    }
}

/// Which of the llama.cpp build's native tools were found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Native {
    /// `cmake` is on `PATH`.
    pub cmake: bool,
    /// `clang` is on `PATH`.
    pub clang: bool,
    /// A libclang shared library was found where bindgen (clang-sys) looks.
    pub libclang: bool,
}

impl Native {
    /// Probes this machine.
    pub fn probe() -> Self {
        let path = env::var_os("PATH");
        let libclang_path = env::var_os("LIBCLANG_PATH").map(PathBuf::from);
        Self {
            cmake: on_path("cmake", path.as_deref()),
            clang: on_path("clang", path.as_deref()),
            libclang: libclang_found(libclang_path.as_deref(), Path::new("/")),
        }
    }

    /// The names of the missing tools, in a fixed order.
    pub fn missing(self) -> Vec<&'static str> {
        [
            (self.cmake, "cmake"),
            (self.clang, "clang"),
            (self.libclang, "libclang"),
        ]
        .into_iter()
        .filter(|(found, _)| !found)
        .map(|(_, name)| name)
        .collect()
    }
}

/// A command to run: the program, its arguments and extra environment variables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cmd {
    /// The program, looked up on `PATH`.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables set for it on top of xtask's own.
    pub env: Vec<(String, String)>,
}

impl Cmd {
    /// A command with no extra environment.
    fn new(program: impl Into<OsString>, args: &[&str]) -> Self {
        Self {
            program: program.into(),
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            env: Vec::new(),
        }
    }
}

/// What to do about one group of prerequisites.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Everything is there: do nothing and print nothing.
    Ready,
    /// Print `announce`, then run `commands` in order; if one cannot run or fails, stop with
    /// `on_failure`.
    Install {
        /// The one line printed before installing: what, how and why.
        announce: String,
        /// The commands that install.
        commands: Vec<Cmd>,
        /// The one line to stop with when an install command fails.
        on_failure: String,
    },
    /// Nothing can be installed from here: stop with this one line.
    Stop(String),
}

/// The prefix that makes a system command run as root here, or `None` when nothing can.
fn root_prefix(host: Host) -> Option<&'static str> {
    if host.root {
        Some("")
    } else if host.sudo {
        Some("sudo ")
    } else {
        None
    }
}

/// The exact command a person runs to get cmake, clang and libclang on `host`, with the verb
/// before it (`run:`, or `run as root:` where sudo is missing), or a sentence where no
/// command is known.
fn native_fix(host: Host) -> String {
    if host.os == Os::Mac {
        return "run: brew install cmake llvm".to_owned();
    }
    let (verb, sudo) = match root_prefix(host) {
        Some(prefix) => ("run:", prefix),
        None => ("run as root:", ""),
    };
    let command = match host.package_manager {
        Some(PackageManager::Apt) => format!(
            "{sudo}apt-get update && {sudo}apt-get install -y {}",
            APT_PACKAGES.join(" ")
        ),
        Some(PackageManager::Dnf) => format!("{sudo}dnf install -y cmake clang clang-devel"),
        Some(PackageManager::Pacman) => format!("{sudo}pacman -S --needed cmake clang"),
        None => {
            return "install them with this system's package manager (and set LIBCLANG_PATH \
                    to the directory of libclang if it is not found)"
                .to_owned();
        }
    };
    format!("{verb} {command}")
}

/// What to do about cmake, clang and libclang: nothing, install them with apt-get (directly
/// as root, through sudo otherwise), or stop with one line naming the command to run.
pub fn plan_native(native: Native, host: Host) -> Plan {
    let missing = native.missing();
    if missing.is_empty() {
        return Plan::Ready;
    }
    let missing = missing.join(", ");
    let fix = native_fix(host);
    let apt = host.package_manager == Some(PackageManager::Apt) && host.os != Os::Mac;
    let Some(sudo) = root_prefix(host).filter(|_| apt) else {
        return Plan::Stop(format!("error: {NATIVE_NEEDS} (missing: {missing}); {fix}"));
    };
    let packages = APT_PACKAGES.join(" ");
    let (update, mut install) = if sudo.is_empty() {
        let mut install = Cmd::new("apt-get", &["install", "-y", "-q"]);
        install
            .env
            .push(("DEBIAN_FRONTEND".to_owned(), "noninteractive".to_owned()));
        (Cmd::new("apt-get", &["update", "-q"]), install)
    } else {
        (
            Cmd::new("sudo", &["apt-get", "update", "-q"]),
            // sudo resets the environment: the variable goes through its command line.
            Cmd::new(
                "sudo",
                &[
                    "DEBIAN_FRONTEND=noninteractive",
                    "apt-get",
                    "install",
                    "-y",
                    "-q",
                ],
            ),
        )
    };
    install
        .args
        .extend(APT_PACKAGES.iter().map(|package| (*package).to_owned()));
    let through = if sudo.is_empty() { "" } else { " through sudo" };
    Plan::Install {
        announce: format!(
            "xtask: installing {packages} with apt-get{through} (missing: {missing}): \
             the embedded model's llama.cpp build needs them"
        ),
        commands: vec![update, install],
        on_failure: format!(
            "error: installing {packages} failed; {NATIVE_NEEDS} (missing: {missing}); {fix}"
        ),
    }
}

/// The line to stop with when tools are still missing after a successful install.
pub fn still_missing_message(native: Native) -> String {
    format!(
        "error: {NATIVE_NEEDS}, and {} still not found after installing {}; put them on PATH \
         (libclang: set LIBCLANG_PATH to its directory)",
        native.missing().join(", "),
        APT_PACKAGES.join(" ")
    )
}

/// What to do about cargo-nextest: nothing, or `cargo install cargo-nextest --locked` with
/// `cargo`, stopping with one line naming that command if it fails.
pub fn plan_nextest(present: bool, cargo: &OsStr) -> Plan {
    if present {
        return Plan::Ready;
    }
    Plan::Install {
        announce: format!(
            "xtask: installing cargo-nextest ({NEXTEST_INSTALL}): the tests run under it"
        ),
        commands: vec![Cmd::new(cargo, &["install", "cargo-nextest", "--locked"])],
        on_failure: format!(
            "error: installing cargo-nextest failed; the tests run under it; run: {NEXTEST_INSTALL}"
        ),
    }
}

/// Carries out `plan`: the error is the one line to stop with.
fn carry_out(plan: Plan) -> Result<(), String> {
    match plan {
        Plan::Ready => Ok(()),
        Plan::Stop(line) => Err(line),
        Plan::Install {
            announce,
            commands,
            on_failure,
        } => {
            eprintln!("{announce}");
            for cmd in commands {
                let status = Command::new(&cmd.program)
                    .args(&cmd.args)
                    .envs(cmd.env.iter().map(|(key, value)| (key, value)))
                    .status();
                if !status.is_ok_and(|status| status.success()) {
                    return Err(on_failure);
                }
            }
            Ok(())
        }
    }
}

/// Makes sure cmake, clang and libclang are there, installing them where possible; the error
/// is the one line to stop with.
pub fn ensure_native() -> Result<(), String> {
    let plan = plan_native(Native::probe(), Host::probe());
    let installed = matches!(plan, Plan::Install { .. });
    carry_out(plan)?;
    if installed {
        let native = Native::probe();
        if !native.missing().is_empty() {
            return Err(still_missing_message(native));
        }
    }
    Ok(())
}

/// Makes sure `cargo nextest` runs, installing cargo-nextest with `cargo` if not; the error is
/// the one line to stop with.
pub fn ensure_nextest(cargo: &OsStr) -> Result<(), String> {
    let plan = plan_nextest(nextest_present(cargo), cargo);
    let installed = matches!(plan, Plan::Install { .. });
    carry_out(plan)?;
    if installed && !nextest_present(cargo) {
        return Err(format!(
            "error: cargo-nextest is still not found after installing it; put cargo's bin \
             directory on PATH, or run: {NEXTEST_INSTALL}"
        ));
    }
    Ok(())
}

/// Whether `cargo nextest` runs (cargo finds it on `PATH` or in its own bin directory).
fn nextest_present(cargo: &OsStr) -> bool {
    Command::new(cargo)
        .args(["nextest", "--version"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// Whether xtask runs as root, by `id -u` (false where `id` is missing, e.g. on Windows).
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|output| output.status.success() && output.stdout.trim_ascii() == b"0")
}

/// Whether `program` is an executable file in one of the directories of `path` (a `PATH`
/// value).
fn on_path(program: &str, path: Option<&OsStr>) -> bool {
    let Some(path) = path else {
        return false;
    };
    env::split_paths(path).any(|dir| {
        is_executable(&dir.join(program))
            || (cfg!(windows) && is_executable(&dir.join(format!("{program}.exe"))))
    })
}

/// Whether `file` is a file (following symbolic links) that may be executed.
fn is_executable(file: &Path) -> bool {
    let Ok(metadata) = fs::metadata(file) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        metadata.is_file() && metadata.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        metadata.is_file()
    }
}

/// Whether a file name is a libclang shared library as clang-sys loads it (`libclang.so`,
/// `libclang.so.1`, `libclang-14.so.1`, `libclang.dylib`, `libclang.dll`), and not one of the
/// other libraries whose names start alike (`libclang-cpp.so.14`, `libclangBasic.a`).
fn is_libclang_file(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("libclang") else {
        return false;
    };
    (rest.starts_with('.') || rest.starts_with('-'))
        && !rest.starts_with("-cpp")
        && (rest.contains(".so") || rest.ends_with(".dylib") || rest.ends_with(".dll"))
}

/// The directories bindgen's clang-sys searches for libclang, `LIBCLANG_PATH` first, with the
/// system directories taken under `root` (`/` outside the tests).
fn libclang_dirs(libclang_path: Option<&Path>, root: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = libclang_path.map(Path::to_path_buf).into_iter().collect();
    let usr_lib = root.join("usr/lib");
    // /usr/lib/llvm-*/lib (Debian, Ubuntu) and the multiarch /usr/lib/*-linux-gnu.
    let mut globbed: Vec<PathBuf> = fs::read_dir(&usr_lib)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with("llvm-") {
                Some(entry.path().join("lib"))
            } else if name.ends_with("-linux-gnu") {
                Some(entry.path())
            } else {
                None
            }
        })
        .collect();
    globbed.sort();
    dirs.extend(globbed);
    dirs.extend(
        [
            "usr/lib64",
            "usr/lib",
            "usr/local/lib",
            // macOS: the command-line tools, Xcode, Homebrew's llvm (Apple silicon and Intel).
            "Library/Developer/CommandLineTools/usr/lib",
            "Applications/Xcode.app/Contents/Developer/Toolchains/XcodeDefault.xctoolchain/usr/lib",
            "opt/homebrew/opt/llvm/lib",
            "usr/local/opt/llvm/lib",
        ]
        .into_iter()
        .map(|dir| root.join(dir)),
    );
    dirs
}

/// Whether a libclang shared library is where clang-sys looks: `LIBCLANG_PATH` (a directory,
/// or the library file itself), then the system directories under `root`.
fn libclang_found(libclang_path: Option<&Path>, root: &Path) -> bool {
    if let Some(file) = libclang_path.filter(|path| path.is_file()) {
        return file
            .file_name()
            .is_some_and(|name| is_libclang_file(&name.to_string_lossy()));
    }
    libclang_dirs(libclang_path, root).iter().any(|dir| {
        fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|entry| {
                is_libclang_file(&entry.file_name().to_string_lossy())
                    && fs::metadata(entry.path()).is_ok_and(|metadata| metadata.is_file())
            })
    })
}

#[cfg(test)]
mod tests;
