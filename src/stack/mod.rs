//! The stack language: a TOML stack file parsed into a typed [`Stack`] whose
//! values keep their source spans. Variables are substituted here; references
//! to other resources stay as expressions for the planner. No network, and no
//! knowledge of AWS: kinds are known only through [`schema::Schema`], and the
//! AWS rules run in the load step above (`crate::load`).

pub mod backend;
pub mod diag;
pub mod expr;
mod parse;
pub mod query;
pub mod schema;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

pub use diag::{Diagnostic, Diagnostics, Source};
pub use expr::{Expr, OutputRef, Span};

use schema::Schema;

/// A parsed, checked stack file.
pub struct Stack {
    pub source: Source,
    pub name: String,
    pub region: String,
    /// `[stack].tags`, added to every taggable resource.
    pub tags: BTreeMap<String, String>,
    /// `[stack].tags` as written, for checks that point into it.
    pub tags_expr: Option<Expr>,
    /// `[stack.backend]`: where state lives when not in a local file.
    pub backend: Option<backend::S3Backend>,
    pub resources: Vec<Resource>,
    pub by_address: HashMap<String, usize>,
    pub outputs: Vec<OutputDecl>,
    /// The variables' final values (after `--var` and `GPUSTACK_VAR_*`).
    pub vars: BTreeMap<String, crate::value::Value>,
    /// Warnings of the load step, shown by the commands.
    pub warnings: Vec<Diagnostic>,
    /// `[import]`: existing objects the stack takes over, in the order written.
    pub imports: Vec<ImportDecl>,
}

/// One `[import]` entry: `"kind.name" = "ID"`. The address is a resource of the stack (the
/// parser checks); whether its kind can be imported and the id's form are the load step's
/// checks, which know the kinds.
#[derive(Clone, Debug)]
pub struct ImportDecl {
    pub address: String,
    /// The id, variables substituted (`${var.x}`); references to resources are refused,
    /// since an import is read before anything is created.
    pub id: String,
    /// Where the address (the key) is written.
    pub key_span: Span,
    /// Where the id (the value) is written.
    pub span: Span,
}

pub struct Resource {
    /// `kind.name`.
    pub address: String,
    pub kind: &'static dyn Schema,
    pub name: String,
    pub attrs: BTreeMap<String, Expr>,
    pub prevent_destroy: bool,
    /// The file spells `prevent_destroy` out (true or false), not left to its default.
    pub prevent_destroy_written: bool,
    /// `depends_on` entries, as references with an empty output name.
    pub depends_on: Vec<OutputRef>,
    /// Where the resource's header is written.
    pub span: Span,
    /// Indices of the resources this one depends on (references and `depends_on`), sorted, unique.
    pub deps: Vec<usize>,
    /// The values were written without errors of their own (a variable without a value, an
    /// unclosed `${`), so checks of what they say may run: one mistake, one error.
    pub values_ok: bool,
    /// The values are fine and passed the kind's schema, so the kind's own checks may run.
    pub schema_ok: bool,
}

pub struct OutputDecl {
    pub name: String,
    pub expr: Expr,
}

/// Where a variable's value may come from besides the stack file.
pub struct VarSources<'a> {
    /// `--var k=v`, highest precedence.
    pub cli: &'a [(String, String)],
    /// `GPUSTACK_VAR_k` lookup.
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

impl VarSources<'_> {
    pub fn process_env(cli: &[(String, String)]) -> VarSources<'_> {
        VarSources { cli, env: &|k| std::env::var(format!("GPUSTACK_VAR_{k}")).ok() }
    }
}

/// Reads a stack file's text. Errors: I/O, or bytes that are not UTF-8, as a located diagnostic.
pub fn read_source(path: &Path) -> Result<Source, Box<Diagnostics>> {
    match std::fs::read(path) {
        Ok(bytes) => source_from_bytes(path, bytes),
        Err(e) => {
            let d = Diagnostic::error(format!("cannot read the stack file: {e}"), None)
                .help("check the path; a stack file is a .toml file with a [stack] table");
            Err(Box::new(Diagnostics { source: Source::new(path, String::new()), items: vec![d] }))
        }
    }
}

/// A stack file's bytes as text. Text that is not UTF-8 is an error at the first bad byte.
pub fn source_from_bytes(path: &Path, bytes: Vec<u8>) -> Result<Source, Box<Diagnostics>> {
    match String::from_utf8(bytes) {
        Ok(text) => Ok(Source::new(path, text)),
        Err(e) => {
            let at = e.utf8_error().valid_up_to();
            // The lossy text keeps the valid prefix, then U+FFFD where the bad bytes were.
            let text = String::from_utf8_lossy(e.as_bytes()).into_owned();
            let d = Diagnostic::error("the stack file is not UTF-8 text", Some(at..at + '\u{FFFD}'.len_utf8()))
                .help("TOML files are UTF-8; re-save the file as UTF-8 (this byte is not part of any character)");
            Err(Box::new(Diagnostics { source: Source::new(path, text), items: vec![d] }))
        }
    }
}

/// Where the `.rs` files under `dir` use any of the crate's `modules` (`rules`), as
/// `path:line: text`: paths (`crate::rules::x`, `rules::x`) and `use crate::{…, rules}`
/// groups, comments left out. The layering tests' grep (`stack` imports no AWS, rules or
/// kinds; `resources` imports no rules).
#[cfg(test)]
pub(crate) fn code_mentions(dir: &Path, modules: &[&str]) -> Vec<String> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let names = |code: &str, m: &str| {
        code.match_indices(m).any(|(i, _)| {
            let before = code[..i].chars().next_back().is_none_or(|c| !is_word(c));
            let after = code[i + m.len()..].chars().next().is_none_or(|c| !is_word(c));
            before && after
        })
    };
    let mut found = vec![];
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let mut in_group = false;
            for (n, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or_default();
                in_group |= code.contains("use crate::{");
                let hit = modules.iter().any(|m| {
                    code.contains(&format!("crate::{m}"))
                        || code.contains(&format!("{m}::"))
                        || (in_group && names(code, m))
                });
                if hit {
                    found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
                }
                if code.contains(';') {
                    in_group = false;
                }
            }
        }
    }
    found.sort();
    found
}

impl Stack {
    /// Parses the language: TOML, variables, each resource against its kind's schema,
    /// references and physical names. Returns the stack with every problem found (errors
    /// included; the caller decides), or only the diagnostics for text that is not TOML.
    pub fn parse(
        source: Source,
        vars: &VarSources,
        kinds: &[&'static dyn Schema],
    ) -> Result<(Stack, Vec<Diagnostic>), Box<Diagnostics>> {
        parse::parse(source, vars, kinds)
    }

    pub fn get(&self, address: &str) -> Option<&Resource> {
        self.by_address.get(address).map(|&i| &self.resources[i])
    }

    /// The `[import]` id written for `address`, if any.
    pub fn import_of(&self, address: &str) -> Option<&ImportDecl> {
        self.imports.iter().find(|i| i.address == address)
    }

    /// The physical name a resource gets unless `name = ...` overrides it.
    pub fn default_physical_name(&self, r: &Resource) -> String {
        format!("{}-{}", self.name, r.name)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The language is a leaf (STYLE.md, Terraform's `configschema`): it knows kinds only
    /// through `Schema`, and nothing of AWS, the rules, plans or state.
    #[test]
    fn the_language_imports_nothing_above_it() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let above = ["resources", "rules", "aws", "plan", "state", "load", "engine", "cli"];
        let found = super::code_mentions(&src.join("stack"), &above);
        assert!(found.is_empty(), "src/stack reaches above the language: {found:#?}");
        // The grep finds a grouped import (`use crate::{graph, resources, rules};`).
        assert!(!super::code_mentions(&src.join("load"), &["rules"]).is_empty());
    }
}
