//! The stack language: a TOML stack file parsed into a typed [`Stack`] whose
//! values keep their source spans. Variables are substituted here; references
//! to other resources stay as expressions for the planner. No network.

pub mod backend;
pub mod diag;
pub mod expr;
#[cfg(test)]
mod mutations;
mod parse;
pub mod schema;

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

pub use diag::{Diagnostic, Diagnostics, Source};
pub use expr::{Expr, OutputRef, Span};

use crate::resources::Kind;

/// A parsed, checked stack file.
pub struct Stack {
    pub source: Source,
    pub name: String,
    pub region: String,
    /// `[stack].tags`, added to every taggable resource.
    pub tags: BTreeMap<String, String>,
    /// `[stack.backend]`: where state lives when not in a local file.
    pub backend: Option<backend::S3Backend>,
    pub resources: Vec<Resource>,
    pub by_address: HashMap<String, usize>,
    pub outputs: Vec<OutputDecl>,
    /// The variables' final values (after `--var` and `GPUSTACK_VAR_*`).
    pub vars: BTreeMap<String, crate::value::Value>,
    pub warnings: Vec<Diagnostic>,
}

pub struct Resource {
    /// `kind.name`.
    pub address: String,
    pub kind: &'static dyn Kind,
    pub name: String,
    pub attrs: BTreeMap<String, Expr>,
    pub prevent_destroy: bool,
    /// `depends_on` entries, as references with an empty output name.
    pub depends_on: Vec<OutputRef>,
    /// Where the resource's header is written.
    pub span: Span,
    /// Indices of the resources this one depends on (references and `depends_on`), sorted, unique.
    pub deps: Vec<usize>,
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

impl Stack {
    /// Reads and checks a stack file. Errors: I/O (as a diagnostic without span) or diagnostics.
    pub fn load(path: &Path, vars: &VarSources) -> Result<Stack, Box<Diagnostics>> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) => {
                let d = Diagnostic::error(format!("cannot read the stack file: {e}"), None)
                    .help("check the path; a stack file is a .toml file with a [stack] table");
                return Err(Box::new(Diagnostics { source: Source::new(path, String::new()), items: vec![d] }));
            }
        };
        Stack::from_bytes(path, bytes, vars)
    }

    /// Checks a stack file's bytes. Text that is not UTF-8 is an error at the first bad byte.
    pub fn from_bytes(path: &Path, bytes: Vec<u8>, vars: &VarSources) -> Result<Stack, Box<Diagnostics>> {
        match String::from_utf8(bytes) {
            Ok(text) => Stack::parse(Source::new(path, text), vars),
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

    pub fn parse(source: Source, vars: &VarSources) -> Result<Stack, Box<Diagnostics>> {
        let mut stack = parse::parse(source, vars)?;
        let (errors, warnings): (Vec<_>, Vec<_>) =
            crate::rules::offline(&stack).into_iter().partition(Diagnostic::is_error);
        if !errors.is_empty() {
            let mut items = errors;
            items.extend(warnings);
            items.extend(stack.warnings);
            items.sort_by_key(|d| d.span.as_ref().map_or(0, |s| s.start));
            return Err(Box::new(Diagnostics { source: stack.source, items }));
        }
        stack.warnings.extend(warnings);
        Ok(stack)
    }

    pub fn get(&self, address: &str) -> Option<&Resource> {
        self.by_address.get(address).map(|&i| &self.resources[i])
    }

    /// The physical name a resource gets unless `name = ...` overrides it.
    pub fn default_physical_name(&self, r: &Resource) -> String {
        format!("{}-{}", self.name, r.name)
    }
}
