//! The modules of kestrel-core form layers that point one way: each imports only the layers
//! below it. This test reads the crate's sources and fails on any path (in a `use` line or
//! written out in code) that points up or sideways, so an import circle cannot come back.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Layer of each top-level module; a module may name only modules of a lower layer (or its own
/// submodules). Modules not listed are the shared foundation (messages, models, tools, events,
/// stores): they may name the run machine's data types and nothing else of these.
const LAYERS: &[(&str, u8)] = &[
    ("run", 1),
    ("workflow", 2),
    ("definition", 3),
    ("runtime", 4),
    ("delegation", 5),
    ("control", 5),
    ("agent", 6),
    ("network", 7),
    ("kestrel", 7),
];

fn layer(module: &str) -> Option<u8> {
    LAYERS.iter().find(|(m, _)| *m == module).map(|(_, l)| *l)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a line without its comment (doc links may point anywhere).
fn code(line: &str) -> &str {
    match line.find("//") {
        Some(i) => &line[..i],
        None => line,
    }
}

/// The top-level modules a file names through `crate::<module>` (also in `crate::{a, b}`
/// groups), outside its unit tests, which may reach anything.
fn named_modules(source: &str) -> Vec<(usize, String)> {
    let mut named = Vec::new();
    for (n, line) in source.lines().enumerate() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let mut rest = code(line);
        while let Some(i) = rest.find("crate::") {
            rest = &rest[i + "crate::".len()..];
            let module = ident(rest);
            if !module.is_empty() {
                named.push((n + 1, module.to_owned()));
            }
        }
    }
    let code: String = source
        .lines()
        .take_while(|line| !line.trim_start().starts_with("#[cfg(test)]"))
        .map(code)
        .collect::<Vec<_>>()
        .join("\n");
    let mut rest = code.as_str();
    while let Some(i) = rest.find("crate::{") {
        let start = i + "crate::{".len();
        let line = code[..code.len() - rest.len() + i].matches('\n').count() + 1;
        let group = &rest[start..];
        let end = group.find('}').unwrap_or(group.len());
        for part in group[..end].split(',') {
            let module = ident(part.trim_start());
            if !module.is_empty() {
                named.push((line, module.to_owned()));
            }
        }
        rest = &group[end..];
    }
    named
}

/// The identifier `s` starts with.
fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// Every top-level module of the crate and the other top-level modules it names.
fn module_graph() -> BTreeMap<String, BTreeMap<String, String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 40, "found only {} source files", files.len());
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(&src).unwrap();
        let top = relative
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        if top == "lib" {
            continue;
        }
        let source = std::fs::read_to_string(file).unwrap();
        let edges = graph.entry(top.clone()).or_default();
        for (line, module) in named_modules(&source) {
            if module != top {
                edges
                    .entry(module)
                    .or_insert_with(|| format!("{}:{line}", relative.display()));
            }
        }
    }
    graph
}

#[test]
fn layers_point_one_way() {
    let graph = module_graph();
    for (module, _) in LAYERS {
        assert!(graph.contains_key(*module), "no module `{module}`");
    }
    let mut wrong = Vec::new();
    for (from, edges) in &graph {
        for (to, at) in edges {
            let (Some(theirs), own) = (layer(to), layer(from)) else {
                continue;
            };
            // The shared foundation (messages, models, tools, events, stores) may use the run
            // machine's data types, and nothing above them.
            let allowed = match own {
                Some(own) => theirs < own,
                None => theirs == 1,
            };
            if !allowed {
                wrong.push(format!("{at}: `{from}` names `crate::{to}`"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that point up or sideways:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn no_import_circle_goes_through_a_layered_module() {
    let graph = module_graph();
    for (start, _) in LAYERS {
        // Depth-first from each module it names; coming back to `start` is a circle.
        let mut stack: Vec<Vec<&str>> = graph[*start]
            .keys()
            .map(|next| vec![*start, next.as_str()])
            .collect();
        let mut seen = std::collections::BTreeSet::new();
        while let Some(path) = stack.pop() {
            let last = *path.last().unwrap();
            if last == *start {
                panic!("import circle: {}", path.join(" -> "));
            }
            if !seen.insert(last) {
                continue;
            }
            for next in graph.get(last).into_iter().flat_map(BTreeMap::keys) {
                let mut longer = path.clone();
                longer.push(next);
                stack.push(longer);
            }
        }
    }
}

/// Circles between top-level modules outside the layers that are known and to be broken. None
/// is left (issue 38 broke the last two: memory and the queue, the event sink and the
/// pub/sub); a new circle fails the test, and so does an entry here that is gone.
const KNOWN_CIRCLES: &[&[&str]] = &[];

/// The sets of top-level modules that name each other, round about (strongly connected
/// components of more than one module), each sorted.
fn circles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    let reaches = |from: &str| {
        let mut seen = std::collections::BTreeSet::new();
        let mut stack = vec![from.to_owned()];
        while let Some(next) = stack.pop() {
            for to in graph.get(&next).into_iter().flat_map(BTreeMap::keys) {
                if seen.insert(to.clone()) {
                    stack.push(to.clone());
                }
            }
        }
        seen
    };
    let reach: BTreeMap<&String, std::collections::BTreeSet<String>> =
        graph.keys().map(|m| (m, reaches(m))).collect();
    let mut found: Vec<Vec<String>> = Vec::new();
    for (module, reached) in &reach {
        if !reached.contains(*module) || found.iter().any(|c| c.contains(*module)) {
            continue;
        }
        let mut circle: Vec<String> = reached
            .iter()
            .filter(|other| reach.get(other).is_some_and(|back| back.contains(*module)))
            .cloned()
            .collect();
        circle.sort();
        found.push(circle);
    }
    found
}

#[test]
fn no_module_names_another_that_names_it_back() {
    let graph = module_graph();
    let found = circles(&graph);
    let known: Vec<Vec<String>> = KNOWN_CIRCLES
        .iter()
        .map(|c| c.iter().map(|m| (*m).to_owned()).collect())
        .collect();
    let new: Vec<&Vec<String>> = found.iter().filter(|c| !known.contains(c)).collect();
    assert!(new.is_empty(), "import circles between modules: {new:?}");
    let gone: Vec<&Vec<String>> = known.iter().filter(|c| !found.contains(c)).collect();
    assert!(
        gone.is_empty(),
        "these circles are gone: take them out of KNOWN_CIRCLES: {gone:?}"
    );
}

#[test]
fn the_checker_sees_paths_in_use_lines_and_code() {
    let named = named_modules(
        "use crate::runtime::Agent;\nuse crate::{\n    definition::X,\n    run::Y,\n};\nlet a = crate::control::f(); // crate::agent\n#[cfg(test)]\nuse crate::kestrel;\n",
    );
    assert_eq!(
        named,
        [
            (1, "runtime".to_owned()),
            (6, "control".to_owned()),
            (2, "definition".to_owned()),
            (2, "run".to_owned()),
        ]
    );
}

/// Circles between the submodules of one folder module that are known and to be broken;
/// the list only shrinks.
const KNOWN_SUBMODULE_CIRCLES: &[(&str, &[&str])] = &[];

/// The submodules of `folder` (a folder module of the crate) a file names: through
/// `crate::<folder>::x`, and through `super::x` or `super::{x, y}` with as many `super::` as
/// lead from the file to `folder` (`depth`), outside its unit tests.
fn named_siblings(source: &str, folder: &str, depth: usize) -> Vec<String> {
    let code: String = source
        .lines()
        .take_while(|line| !line.trim_start().starts_with("#[cfg(test)]"))
        .map(code)
        .collect::<Vec<_>>()
        .join("\n");
    let mut named = Vec::new();
    let up = "super::".repeat(depth);
    for prefix in [format!("crate::{folder}::"), up] {
        let mut from = 0;
        while let Some(i) = code[from..].find(&prefix) {
            let at = from + i;
            from = at + prefix.len();
            let rest = &code[from..];
            // `super::` must be the whole chain: not the tail of a longer one, nor its head.
            if prefix.starts_with("super")
                && (code[..at].ends_with("super::") || rest.starts_with("super::"))
            {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for part in group[..end].split(',') {
                    let name = ident(part.trim_start());
                    if !name.is_empty() && name != "self" {
                        named.push(name.to_owned());
                    }
                }
            } else {
                let name = ident(rest);
                if !name.is_empty() && name != "super" && name != "self" {
                    named.push(name.to_owned());
                }
            }
        }
    }
    named
}

/// The submodules of folder module `folder` and the sibling submodules each names.
fn submodule_graph(folder: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(folder);
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(&root).unwrap();
        let parts: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts == ["mod.rs"] {
            continue;
        }
        let own = parts[0].trim_end_matches(".rs").to_owned();
        let depth = parts.len() - usize::from(parts.last().is_some_and(|p| p == "mod.rs"));
        let source = std::fs::read_to_string(file).unwrap();
        let edges = graph.entry(own.clone()).or_default();
        for sibling in named_siblings(&source, folder, depth) {
            if sibling != own {
                edges
                    .entry(sibling)
                    .or_insert_with(|| relative.display().to_string());
            }
        }
    }
    // Only names that are submodules (not items of the folder's own `mod.rs`).
    let modules: Vec<String> = graph.keys().cloned().collect();
    for edges in graph.values_mut() {
        edges.retain(|to, _| modules.contains(to));
    }
    graph
}

#[test]
fn no_submodule_names_a_sibling_that_names_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found: Vec<(String, Vec<String>)> = Vec::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let folder = path.file_name().unwrap().to_string_lossy().into_owned();
            for circle in circles(&submodule_graph(&folder)) {
                found.push((folder.clone(), circle));
            }
        }
    }
    let known: Vec<(String, Vec<String>)> = KNOWN_SUBMODULE_CIRCLES
        .iter()
        .map(|(f, c)| ((*f).to_owned(), c.iter().map(|m| (*m).to_owned()).collect()))
        .collect();
    let new: Vec<&(String, Vec<String>)> = found.iter().filter(|c| !known.contains(c)).collect();
    assert!(new.is_empty(), "import circles between submodules: {new:?}");
    let gone: Vec<&(String, Vec<String>)> = known.iter().filter(|c| !found.contains(c)).collect();
    assert!(
        gone.is_empty(),
        "these circles are gone: take them out of KNOWN_SUBMODULE_CIRCLES: {gone:?}"
    );
}

#[test]
fn the_sibling_checker_sees_super_paths_and_groups() {
    let source = "use super::registry::Key;\nuse super::{live, cluster::Hold};\nuse super::super::lease;\nlet x = crate::runtime::queue::f();\n";
    let mut named = named_siblings(source, "runtime", 1);
    named.sort();
    assert_eq!(named, ["cluster", "live", "queue", "registry"]);
    let deeper = named_siblings(
        "use super::super::stream::S;\nuse super::local;\n",
        "runtime",
        2,
    );
    assert_eq!(deeper, ["stream"]);
}
