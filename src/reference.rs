//! The stack language's reference, `docs/reference/<kind>.md`, generated from each kind's
//! [`Schema`] (attributes with type, required or default, what a change does, nested
//! tables, computed attributes, outputs) and a hand-written doc source per kind,
//! `docs/reference/src/<kind>.toml` (summary, example, one description per attribute and
//! output). The schema says *what* exists, the source says *what it means*; a test fails
//! when a page is stale, a description is missing or names nothing, or an example does not
//! validate. Regenerate with `GPUSTACK_UPDATE_REFERENCE=1 cargo test --locked --lib reference`.
//!
//! Doc source format (`docs/reference/src/<kind>.toml`):
//!
//! ```toml
//! summary = "What the kind is and what it creates in AWS (or renders)."
//! example = '''
//! [kind.name]
//! attr = "..."
//! '''
//! [attrs]
//! attr_name = "Meaning, allowed values, default, what a change does."
//! "object_attr.sub_key" = "..."     # nested tables, lists of tables and maps of tables alike
//! [outputs]
//! id = "..."
//! ```
//!
//! An importable kind (`Kind::import_id`) also has `import = "..."`: how to find the id and
//! what an import reads (the page's "Import" section shows the id form with it).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::stack::schema::{Attr, Default, OnChange, Schema, Ty};

/// One kind's hand-written documentation.
#[derive(Debug, Default)]
pub struct DocSource {
    pub summary: String,
    pub example: String,
    /// Attribute path (`scaling.min`) → description.
    pub attrs: BTreeMap<String, String>,
    pub outputs: BTreeMap<String, String>,
    /// For an importable kind: how to find the `[import]` id and what the import reads.
    pub import: String,
}

impl DocSource {
    /// Parses a doc source; an error names what is wrong with the file.
    pub fn parse(text: &str) -> Result<DocSource, String> {
        let doc = text.parse::<toml_edit::DocumentMut>().map_err(|e| e.to_string())?;
        let string = |k: &str| doc.get(k).and_then(|i| i.as_str()).map(str::to_string);
        let table = |k: &str| -> Result<BTreeMap<String, String>, String> {
            let Some(item) = doc.get(k) else { return Ok(BTreeMap::new()) };
            let t = item.as_table_like().ok_or(format!("`{k}` must be a table"))?;
            t.iter()
                .map(|(key, v)| {
                    let text = v.as_str().ok_or(format!("`{k}.{key}` must be a string"))?;
                    Ok((key.to_string(), text.to_string()))
                })
                .collect()
        };
        for (k, _) in doc.iter() {
            if !matches!(k, "summary" | "example" | "attrs" | "outputs" | "import") {
                return Err(format!("unknown key `{k}` (summary, example, attrs, outputs, import)"));
            }
        }
        Ok(DocSource {
            summary: string("summary").unwrap_or_default(),
            example: string("example").unwrap_or_default(),
            attrs: table("attrs")?,
            outputs: table("outputs")?,
            import: string("import").unwrap_or_default(),
        })
    }
}

/// Every attribute path a kind has: top-level attributes and, for tables with fixed keys
/// (alone, in a list or in a map), `attr.key`, depth first.
pub fn attr_paths(kind: &dyn Schema) -> Vec<(String, Attr)> {
    fn walk(prefix: &str, attrs: &[Attr], out: &mut Vec<(String, Attr)>) {
        for a in attrs {
            let path = if prefix.is_empty() { a.name.to_string() } else { format!("{prefix}.{}", a.name) };
            out.push((path.clone(), *a));
            if let Some(inner) = object_of(&a.ty) {
                walk(&path, inner, out);
            }
        }
    }
    let mut out = vec![];
    walk("", kind.attrs(), &mut out);
    out
}

/// The fixed keys of a table type, also inside a list or map.
fn object_of(ty: &Ty) -> Option<&'static [Attr]> {
    match ty {
        Ty::Object(attrs) => Some(attrs),
        Ty::List(t) | Ty::Map(t) => object_of(t),
        _ => None,
    }
}

/// A type as the reference writes it.
pub fn type_name(ty: &Ty) -> String {
    match ty {
        Ty::Str => "string".into(),
        Ty::Int => "integer".into(),
        Ty::Bool => "boolean".into(),
        Ty::Number => "number".into(),
        Ty::Enum(vs) => vs.iter().map(|v| format!("`\"{v}\"`")).collect::<Vec<_>>().join(" | "),
        Ty::List(t) => format!("list of {}", type_name(t)),
        Ty::Map(t) => format!("table of {}", type_name(t)),
        Ty::Object(_) => "table (keys below)".into(),
        Ty::Any => "any".into(),
    }
}

fn default_text(a: &Attr) -> String {
    if a.computed {
        return "computed".into();
    }
    if a.required {
        return "**required**".into();
    }
    match a.default {
        Default::None => "optional".into(),
        Default::Bool(b) => format!("`{b}`"),
        Default::Int(n) => format!("`{n}`"),
        Default::Str(s) => format!("`\"{s}\"`"),
        Default::EmptyList => "`[]`".into(),
        Default::EmptyMap => "`{}`".into(),
    }
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// The markdown page of one kind.
pub fn page(kind: &dyn Schema, src: &DocSource) -> String {
    let mut out = String::new();
    let name = kind.name();
    let _ = writeln!(out, "<!-- Generated from the schema and docs/reference/src/{name}.toml; do not edit. -->");
    let _ = writeln!(out, "# `{name}`\n\n{}\n", src.summary.trim());
    let _ = writeln!(out, "## Example\n\n```toml\n{}\n```\n", src.example.trim());
    let _ = writeln!(out, "## Attributes\n");
    let _ = writeln!(out, "| attribute | type | default | on change | description |\n|---|---|---|---|---|");
    for (path, a) in attr_paths(kind) {
        let change = match a.on_change {
            OnChange::Update => "update in place",
            OnChange::Replace => "**replace**",
        };
        let desc = src.attrs.get(&path).map(String::as_str).unwrap_or_default();
        let _ = writeln!(
            out,
            "| `{path}` | {} | {} | {change} | {} |",
            cell(&type_name(&a.ty)),
            default_text(&a),
            cell(desc.trim())
        );
    }
    let _ = writeln!(
        out,
        "\nA *computed* attribute is derived by gpustack from the others and never written; plans show it so its changes are visible.\n"
    );
    let _ = writeln!(out, "## Outputs\n");
    if kind.outputs().is_empty() {
        let _ = writeln!(out, "None: nothing can refer to a `{name}`.");
    } else {
        let _ = writeln!(out, "Refer to them as `${{{name}.NAME.OUTPUT}}`.\n");
        let _ = writeln!(out, "| output | type | description |\n|---|---|---|");
        for (o, ty) in kind.outputs() {
            let desc = src.outputs.get(*o).map(String::as_str).unwrap_or_default();
            let _ = writeln!(out, "| `{o}` | {} | {} |", cell(&type_name(ty)), cell(desc.trim()));
        }
    }
    let _ = writeln!(out, "\n## Import\n");
    match import_id(name) {
        Some(form) => {
            let _ = writeln!(
                out,
                "Import id: `{form}`. To take over an object made outside gpustack, declare it and name it under `[import]`:\n\n```toml\n[import]\n\"{name}.NAME\" = \"ID\"\n```\n\n{}",
                src.import.trim()
            );
        }
        None => {
            let _ = writeln!(out, "A `{name}` cannot be imported (`[import]`).");
        }
    }
    out
}

/// The kind's `[import]` id form, when it can be imported.
fn import_id(name: &str) -> Option<&'static str> {
    crate::resources::kind(name).and_then(|k| k.import_id())
}

/// What is wrong with one kind's doc source: descriptions missing or naming nothing, an
/// empty summary or example, an example that does not validate.
pub fn problems(kind: &dyn Schema, src: &DocSource) -> Vec<String> {
    let name = kind.name();
    let mut out = vec![];
    if src.summary.trim().is_empty() {
        out.push(format!("{name}: no `summary`"));
    }
    match (import_id(name).is_some(), src.import.trim().is_empty()) {
        (true, true) => out.push(format!("{name}: importable (import_id) but no `import` description")),
        (false, false) => out.push(format!("{name}: an `import` description, but the kind cannot be imported")),
        _ => {}
    }
    let paths = attr_paths(kind);
    for (p, _) in &paths {
        if src.attrs.get(p).is_none_or(|d| d.trim().is_empty()) {
            out.push(format!("{name}: attribute `{p}` has no description in [attrs]"));
        }
    }
    for k in src.attrs.keys() {
        if !paths.iter().any(|(p, _)| p == k) {
            out.push(format!("{name}: [attrs] describes `{k}`, which the schema does not have"));
        }
    }
    for (o, _) in kind.outputs() {
        if src.outputs.get(*o).is_none_or(|d| d.trim().is_empty()) {
            out.push(format!("{name}: output `{o}` has no description in [outputs]"));
        }
    }
    for k in src.outputs.keys() {
        if !kind.outputs().iter().any(|(o, _)| o == k) {
            out.push(format!("{name}: [outputs] describes `{k}`, which the kind does not output"));
        }
    }
    match example_errors(&src.example) {
        _ if src.example.trim().is_empty() => out.push(format!("{name}: no `example`")),
        Some(e) => out.push(format!("{name}: the example does not validate:\n{e}")),
        None => {}
    }
    if !src.example.contains(&format!("[{name}.")) {
        out.push(format!("{name}: the example declares no `[{name}.NAME]`"));
    }
    out
}

/// The example's errors through the real loader (`validate`'s), `None` when it passes. An
/// example without a `[stack]` table gets one, so examples show only what is theirs.
pub fn example_errors(example: &str) -> Option<String> {
    let text = if example.contains("[stack]") {
        example.to_string()
    } else {
        format!("[stack]\nname = \"docs\"\nregion = \"us-west-2\"\n\n{example}")
    };
    let source = crate::stack::Source::new(Path::new("example.toml"), text);
    let vars = crate::stack::VarSources { cli: &[], env: &|_| None };
    crate::load::check(source, &vars).err().map(|d| d.render(false))
}

/// The index page: every kind with its summary, then the common syntax (hand-written in
/// `docs/reference/src/README.md`).
pub fn index(kinds: &[(&dyn Schema, DocSource)], syntax: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "<!-- Generated from the schema and docs/reference/src/; do not edit. -->");
    let _ = writeln!(out, "# Stack language reference\n");
    let _ = writeln!(
        out,
        "One page per resource kind, generated from the kinds' schemas (the names, types, defaults and change rules `gpustack validate` checks) and the descriptions in `docs/reference/src/`.\n"
    );
    let _ = writeln!(out, "| kind | what it is |\n|---|---|");
    for (k, src) in kinds {
        let first = src.summary.trim().split_inclusive(". ").next().unwrap_or_default().trim();
        let _ = writeln!(out, "| [`{0}`]({0}.md) | {1} |", k.name(), cell(first));
    }
    let _ = writeln!(out, "\n{}", syntax.trim());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reference")
    }

    fn sources() -> Vec<(&'static dyn Schema, Result<DocSource, String>)> {
        crate::resources::schemas()
            .into_iter()
            .map(|k| {
                let path = root().join("src").join(format!("{}.toml", k.name()));
                let src = std::fs::read_to_string(&path)
                    .map_err(|e| format!("{}: {e}", path.display()))
                    .and_then(|t| DocSource::parse(&t).map_err(|e| format!("{}: {e}", path.display())));
                (k, src)
            })
            .collect()
    }

    /// Every kind has a complete doc source whose example validates, and every page on disk
    /// is what the generator writes now (`GPUSTACK_UPDATE_REFERENCE=1` rewrites them).
    #[test]
    fn reference_pages_are_complete_and_current() {
        let update = std::env::var_os("GPUSTACK_UPDATE_REFERENCE").is_some();
        let mut bad = vec![];
        let mut parsed = vec![];
        for (k, src) in sources() {
            match src {
                Ok(src) => {
                    bad.extend(problems(k, &src));
                    parsed.push((k, src));
                }
                Err(e) => bad.push(e),
            }
        }
        let syntax = std::fs::read_to_string(root().join("src/README.md")).unwrap_or_default();
        let mut pages: Vec<(std::path::PathBuf, String)> =
            parsed.iter().map(|(k, src)| (root().join(format!("{}.md", k.name())), page(*k, src))).collect();
        pages.push((root().join("README.md"), index(&parsed, &syntax)));
        for (path, text) in pages {
            if update {
                std::fs::write(&path, &text).unwrap();
            } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
                bad.push(format!(
                    "{} is stale: run GPUSTACK_UPDATE_REFERENCE=1 cargo test --locked --lib reference",
                    path.display()
                ));
            }
        }
        assert!(bad.is_empty(), "{} problem(s):\n{}", bad.len(), bad.join("\n"));
    }

    struct Toy;
    impl Schema for Toy {
        fn name(&self) -> &'static str {
            "toy"
        }
        fn attrs(&self) -> &'static [Attr] {
            const SCALING: &[Attr] = &[Attr::req("min", Ty::Int, OnChange::Update)];
            const ATTRS: &[Attr] = &[
                Attr::req("cidr_block", Ty::Str, OnChange::Replace),
                Attr::opt("scaling", Ty::Object(SCALING), Default::None, OnChange::Update),
                Attr::computed("user_data", Ty::Str, OnChange::Update),
            ];
            ATTRS
        }
        fn outputs(&self) -> &'static [(&'static str, Ty)] {
            &[("id", Ty::Str)]
        }
    }

    /// The checks catch what they promise: a missing description (nested too), one for an
    /// attribute or output that does not exist, and an example that does not validate.
    #[test]
    fn problems_name_missing_unknown_and_invalid() {
        let src = DocSource::parse(
            "summary = \"A toy.\"\nexample = '''\n[toy.a]\ncidr_block = 1\n'''\n[attrs]\ncidr_block = \"The range.\"\nscaling = \"Sizes.\"\nuser_data = \"Made.\"\ncidr = \"Typo.\"\n[outputs]\narn = \"No.\"\n",
        )
        .unwrap();
        let p = problems(&Toy, &src);
        let has = |s: &str| p.iter().any(|x| x.contains(s));
        assert!(has("attribute `scaling.min` has no description"), "{p:#?}");
        assert!(has("[attrs] describes `cidr`, which the schema does not have"), "{p:#?}");
        assert!(has("output `id` has no description"), "{p:#?}");
        assert!(has("[outputs] describes `arn`"), "{p:#?}");
        // `toy` is no kind of the real loader: the example is refused.
        assert!(has("the example does not validate"), "{p:#?}");
        assert!(DocSource::parse("summry = \"x\"").unwrap_err().contains("unknown key `summry`"));
    }

    #[test]
    fn pages_show_types_defaults_change_rules_and_nesting() {
        let src = DocSource::parse("summary = \"A toy.\"\n[attrs]\n\"scaling.min\" = \"Fewest | nodes.\"\n").unwrap();
        let p = page(&Toy, &src);
        assert!(p.contains("| `cidr_block` | string | **required** | **replace** |"), "{p}");
        assert!(p.contains("| `scaling.min` | integer | **required** | update in place | Fewest \\| nodes. |"), "{p}");
        assert!(p.contains("| `user_data` | string | computed |"), "{p}");
        assert!(p.contains("| `id` | string |"), "{p}");
    }
}
