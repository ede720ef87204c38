//! The unit tests of the prerequisites: the plans and messages for injected machines, and the
//! file probes on temporary directories.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

/// All three native tools found.
const ALL: Native = Native {
    cmake: true,
    clang: true,
    libclang: true,
};

/// Only cmake missing.
const NO_CMAKE: Native = Native {
    cmake: false,
    ..ALL
};

/// A Debian machine with the given user and sudo.
fn debian(root: bool, sudo: bool) -> Host {
    Host {
        os: Os::Linux,
        root,
        sudo,
        package_manager: Some(PackageManager::Apt),
    }
}

/// The stop line of a plan, failing the test for other plans.
fn stop_line(plan: Plan) -> String {
    match plan {
        Plan::Stop(line) => line,
        other => panic!("expected a stop, got {other:?}"),
    }
}

/// A fresh directory under the system's temporary directory.
fn temp_dir(name: &str) -> PathBuf {
    let dir = env::temp_dir().join(format!("xtask-test-{}-{name}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn nothing_to_do_when_everything_is_there() {
    for host in [
        debian(true, false),
        debian(false, true),
        debian(false, false),
    ] {
        assert_eq!(plan_native(ALL, host), Plan::Ready);
    }
    let mac = Host {
        os: Os::Mac,
        root: false,
        sudo: true,
        package_manager: None,
    };
    assert_eq!(plan_native(ALL, mac), Plan::Ready);
    assert_eq!(plan_nextest(true, OsStr::new("cargo")), Plan::Ready);
}

#[test]
fn missing_lists_the_missing_tools_in_order() {
    assert_eq!(ALL.missing(), Vec::<&str>::new());
    let none = Native {
        cmake: false,
        clang: false,
        libclang: false,
    };
    assert_eq!(none.missing(), ["cmake", "clang", "libclang"]);
    let no_libclang = Native {
        libclang: false,
        ..ALL
    };
    assert_eq!(no_libclang.missing(), ["libclang"]);
}

#[test]
fn root_on_debian_installs_with_apt_get_directly() {
    let Plan::Install {
        announce,
        commands,
        on_failure,
    } = plan_native(NO_CMAKE, debian(true, false))
    else {
        panic!("expected an install");
    };
    assert_eq!(
        announce,
        "xtask: installing cmake clang libclang-dev with apt-get (missing: cmake): \
         the embedded model's llama.cpp build needs them"
    );
    assert_eq!(commands.len(), 2);
    assert_eq!(commands[0], Cmd::new("apt-get", &["update", "-q"]));
    assert_eq!(commands[1].program, "apt-get");
    assert_eq!(
        commands[1].args,
        ["install", "-y", "-q", "cmake", "clang", "libclang-dev"]
    );
    assert_eq!(
        commands[1].env,
        [("DEBIAN_FRONTEND".to_owned(), "noninteractive".to_owned())]
    );
    assert_eq!(
        on_failure,
        "error: installing cmake clang libclang-dev failed; building the embedded model \
         needs cmake, clang and libclang (missing: cmake); run: apt-get update && \
         apt-get install -y cmake clang libclang-dev"
    );
}

#[test]
fn a_user_with_sudo_on_debian_installs_through_sudo() {
    let Plan::Install {
        announce,
        commands,
        on_failure,
    } = plan_native(NO_CMAKE, debian(false, true))
    else {
        panic!("expected an install");
    };
    assert!(announce.contains("with apt-get through sudo"), "{announce}");
    assert_eq!(commands[0], Cmd::new("sudo", &["apt-get", "update", "-q"]));
    assert_eq!(
        commands[1],
        Cmd::new(
            "sudo",
            &[
                "DEBIAN_FRONTEND=noninteractive",
                "apt-get",
                "install",
                "-y",
                "-q",
                "cmake",
                "clang",
                "libclang-dev"
            ]
        )
    );
    assert!(
        on_failure.ends_with(
            "; run: sudo apt-get update && sudo apt-get install -y cmake clang libclang-dev"
        ),
        "{on_failure}"
    );
}

#[test]
fn a_user_without_sudo_is_told_to_run_apt_get_as_root() {
    assert_eq!(
        stop_line(plan_native(NO_CMAKE, debian(false, false))),
        "error: building the embedded model needs cmake, clang and libclang (missing: \
         cmake); run as root: apt-get update && apt-get install -y cmake clang libclang-dev"
    );
}

#[test]
fn macos_names_brew() {
    let mac = Host {
        os: Os::Mac,
        root: false,
        sudo: true,
        package_manager: None,
    };
    assert_eq!(
        stop_line(plan_native(NO_CMAKE, mac)),
        "error: building the embedded model needs cmake, clang and libclang (missing: \
         cmake); run: brew install cmake llvm"
    );
}

#[test]
fn other_linux_systems_are_told_their_command_without_installing() {
    let fedora = Host {
        os: Os::Linux,
        root: false,
        sudo: true,
        package_manager: Some(PackageManager::Dnf),
    };
    assert!(
        stop_line(plan_native(NO_CMAKE, fedora))
            .ends_with("; run: sudo dnf install -y cmake clang clang-devel")
    );
    let arch = Host {
        os: Os::Linux,
        root: true,
        sudo: false,
        package_manager: Some(PackageManager::Pacman),
    };
    assert!(
        stop_line(plan_native(NO_CMAKE, arch)).ends_with("; run: pacman -S --needed cmake clang")
    );
    let unknown = Host {
        os: Os::Other,
        root: false,
        sudo: false,
        package_manager: None,
    };
    let line = stop_line(plan_native(NO_CMAKE, unknown));
    assert!(
        line.starts_with("error: building the embedded model needs"),
        "{line}"
    );
    assert!(line.contains("package manager"), "{line}");
}

#[test]
fn every_message_is_one_line() {
    let hosts = [
        debian(true, false),
        debian(false, true),
        debian(false, false),
        Host {
            os: Os::Mac,
            root: false,
            sudo: false,
            package_manager: None,
        },
        Host {
            os: Os::Other,
            root: false,
            sudo: false,
            package_manager: None,
        },
    ];
    let mut lines = vec![still_missing_message(NO_CMAKE)];
    for host in hosts {
        match plan_native(NO_CMAKE, host) {
            Plan::Stop(line) => lines.push(line),
            Plan::Install {
                announce,
                on_failure,
                ..
            } => lines.extend([announce, on_failure]),
            Plan::Ready => panic!("nothing planned for a missing tool"),
        }
    }
    if let Plan::Install {
        announce,
        on_failure,
        ..
    } = plan_nextest(false, OsStr::new("cargo"))
    {
        lines.extend([announce, on_failure]);
    }
    for line in lines {
        assert!(!line.contains('\n'), "{line}");
    }
}

#[test]
fn still_missing_names_what_is_missing() {
    let line = still_missing_message(Native {
        libclang: false,
        ..ALL
    });
    assert!(line.contains("libclang still not found"), "{line}");
    assert!(line.contains("LIBCLANG_PATH"), "{line}");
}

#[test]
fn missing_nextest_is_installed_with_cargo() {
    let plan = plan_nextest(false, OsStr::new("/opt/cargo/bin/cargo"));
    assert_eq!(
        plan,
        Plan::Install {
            announce: "xtask: installing cargo-nextest (cargo install cargo-nextest \
                       --locked): the tests run under it"
                .to_owned(),
            commands: vec![Cmd::new(
                "/opt/cargo/bin/cargo",
                &["install", "cargo-nextest", "--locked"]
            )],
            on_failure: "error: installing cargo-nextest failed; the tests run under it; \
                         run: cargo install cargo-nextest --locked"
                .to_owned(),
        }
    );
}

#[test]
fn libclang_file_names() {
    for name in [
        "libclang.so",
        "libclang.so.1",
        "libclang-14.so.1",
        "libclang-14.0.6.so",
        "libclang.so.18.1",
        "libclang.dylib",
        "libclang.dll",
    ] {
        assert!(is_libclang_file(name), "{name}");
    }
    for name in [
        "libclang-cpp.so.14",
        "libclang-cpp.so",
        "libclangBasic.a",
        "libclang_rt.asan.so",
        "libclang.a",
        "clang",
        "libc.so.6",
    ] {
        assert!(!is_libclang_file(name), "{name}");
    }
}

#[test]
fn libclang_is_found_under_llvm_multiarch_or_libclang_path() {
    let root = temp_dir("libclang");
    assert!(!libclang_found(None, &root));

    // Only libclang-cpp: not bindgen's library.
    let llvm = root.join("usr/lib/llvm-14/lib");
    fs::create_dir_all(&llvm).unwrap();
    fs::write(llvm.join("libclang-cpp.so.14"), "").unwrap();
    assert!(!libclang_found(None, &root));

    fs::write(llvm.join("libclang-14.so.1"), "").unwrap();
    assert!(libclang_found(None, &root));

    let multiarch_root = temp_dir("multiarch");
    let multiarch = multiarch_root.join("usr/lib/aarch64-linux-gnu");
    fs::create_dir_all(&multiarch).unwrap();
    fs::write(multiarch.join("libclang.so.1"), "").unwrap();
    assert!(libclang_found(None, &multiarch_root));

    // LIBCLANG_PATH as a directory and as the file itself; system directories still count.
    let custom = temp_dir("custom");
    let empty_root = temp_dir("empty");
    assert!(!libclang_found(Some(&custom), &empty_root));
    fs::write(custom.join("libclang.so"), "").unwrap();
    assert!(libclang_found(Some(&custom), &empty_root));
    assert!(libclang_found(
        Some(&custom.join("libclang.so")),
        &empty_root
    ));
    assert!(libclang_found(Some(&empty_root.join("nowhere")), &root));

    for dir in [root, multiarch_root, custom, empty_root] {
        fs::remove_dir_all(dir).unwrap();
    }
}

#[cfg(unix)]
#[test]
fn on_path_needs_an_executable_file() {
    use std::os::unix::fs::PermissionsExt;

    let dir = temp_dir("path");
    fs::write(dir.join("tool"), "").unwrap();
    fs::write(dir.join("data"), "").unwrap();
    fs::create_dir(dir.join("folder")).unwrap();
    fs::set_permissions(dir.join("tool"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::set_permissions(dir.join("data"), fs::Permissions::from_mode(0o644)).unwrap();
    let path = env::join_paths([Path::new("/nonexistent"), &dir]).unwrap();
    assert!(on_path("tool", Some(&path)));
    assert!(!on_path("data", Some(&path)));
    assert!(!on_path("folder", Some(&path)));
    assert!(!on_path("missing", Some(&path)));
    assert!(!on_path("tool", None));
    fs::remove_dir_all(dir).unwrap();
}
