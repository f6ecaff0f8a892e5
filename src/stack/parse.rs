//! TOML → `Stack`: walks the toml_edit document (which keeps spans), substitutes
//! variables, checks every resource against its kind's schema and every
//! reference against the stack, and reports all problems of the file at once.

use std::collections::{BTreeMap, HashMap};

use toml_edit::{Item, Table};

use super::diag::{Diagnostic, Diagnostics, Source, closest};
use super::expr::{Expr, ExprKind, OutputRef, Part, RawPart, RawRef, Span, parse_template};
use super::schema::{self, Schema, Ty};
use super::{ImportDecl, OutputDecl, Resource, Stack, VarSources};
use crate::value::Value;

const STACK_KEYS: &[&str] = &["name", "region", "tags", "backend"];
const META_KEYS: &[&str] = &["depends_on", "prevent_destroy"];

struct Parser<'a> {
    src: &'a str,
    /// The kinds users may write (`crate::resources` passes its registry).
    kinds: &'a [&'static dyn Schema],
    /// `GPUSTACK_VAR_k`, for variables used without a `[vars]` default.
    env: &'a dyn Fn(&str) -> Option<String>,
    vars: BTreeMap<String, Value>,
    used_vars: std::collections::BTreeSet<String>,
    diags: Vec<Diagnostic>,
}

/// The stack and every problem found in it, or, for text that is not TOML, that one problem.
pub fn parse(
    source: Source,
    var_sources: &VarSources,
    kinds: &[&'static dyn Schema],
) -> Result<(Stack, Vec<Diagnostic>), Box<Diagnostics>> {
    let doc = match toml_edit::Document::parse(source.text.as_str()) {
        Ok(d) => d,
        Err(e) => {
            let msg = e.message().trim().to_string();
            let help = if msg.contains("duplicate key") {
                "each resource address and each key may appear once; rename or remove the duplicate"
            } else {
                "fix the TOML syntax here (https://toml.io); strings need quotes, tables need [brackets]"
            };
            let d = Diagnostic::error(format!("invalid TOML: {msg}"), e.span()).help(help);
            return Err(Box::new(Diagnostics { source, items: vec![d] }));
        }
    };
    let root = doc.as_table();
    let mut p = Parser {
        src: &source.text,
        kinds,
        env: var_sources.env,
        vars: BTreeMap::new(),
        used_vars: Default::default(),
        diags: vec![],
    };
    p.collect_vars(root, var_sources);

    // [stack]
    let (mut name, mut region, mut tags, mut backend) = (String::new(), String::new(), BTreeMap::new(), None);
    let mut tags_expr = None;
    match root.get("stack") {
        Some(Item::Table(t)) => {
            let e = p.table_expr(t, None);
            if let ExprKind::Table(m) = &e.kind {
                name = p.stack_string(m, "name", e.span.clone());
                region = p.stack_string(m, "region", e.span.clone());
                if let Some(te) = m.get("tags") {
                    schema::check(te, &Ty::Map(&Ty::Str), "stack.tags", &|_| None, &mut p.diags);
                    tags_expr = Some(te.clone());
                    if te.as_single_ref().is_none()
                        && let Value::Table(t) = te.resolve(&|_| Value::Unknown)
                    {
                        tags = t.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect();
                    }
                }
                if let Some(be) = m.get("backend") {
                    backend = super::backend::parse(be, &mut p.diags);
                }
                for (k, v) in m.iter().filter(|(k, _)| !STACK_KEYS.contains(&k.as_str())) {
                    p.diags.push(schema::unknown_key(k, v, STACK_KEYS.iter().copied(), "stack"));
                }
            }
            if !name.is_empty() && !valid_stack_name(&name) {
                let span = m_span(root, "stack", "name");
                p.diags.push(Diagnostic::error(format!("stack name \"{name}\" is not valid"), span).help(
                    "a stack name is 1-31 characters of a-z, 0-9 and '-', starting with a letter (after variables)",
                ));
            }
        }
        _ => p.diags.push(
            Diagnostic::error("the stack file has no [stack] table", Some(0..0))
                .help("start the file with:\n  [stack]\n  name = \"my-stack\"\n  region = \"us-west-2\""),
        ),
    }

    // resources
    let mut resources: Vec<Resource> = vec![];
    let mut outputs = vec![];
    let mut import_item = None;
    for (key, item) in root.iter() {
        let key_span = root.key(key).and_then(|k| k.span());
        match key {
            "stack" | "vars" => {}
            "output" => outputs = p.outputs(item),
            "import" => import_item = Some(item),
            _ => match kinds.iter().copied().find(|k| k.name() == key) {
                Some(kind) => p.kind_table(kind, item, key_span, &mut resources),
                None => {
                    let known = kinds.iter().map(|k| k.name()).chain(["stack", "vars", "output", "import"]);
                    let d = Diagnostic::error(format!("unknown resource kind `{key}`"), key_span);
                    p.diags.push(match closest(key, known.clone()) {
                        Some(c) => d.help(format!("did you mean `{c}`?")),
                        None => d.help(format!(
                            "the kinds are: {}",
                            kinds.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
                        )),
                    });
                }
            },
        }
    }

    let by_address: HashMap<String, usize> =
        resources.iter().enumerate().map(|(i, r)| (r.address.clone(), i)).collect();
    p.check_references(&mut resources, &by_address, &outputs);
    p.check_physical_names(&resources, &name);
    let imports = import_item.map(|item| p.imports(item, &resources, &by_address)).unwrap_or_default();

    let declared: Vec<String> = match root.get("vars") {
        Some(Item::Table(t)) => t.iter().map(|(k, _)| k.to_string()).collect(),
        _ => vec![],
    };
    for (k, _) in var_sources.cli {
        if !p.used_vars.contains(k) && !declared.contains(k) {
            let d = Diagnostic::warning(format!("--var {k} is not declared in [vars] and nothing uses it"), None);
            p.diags.push(match closest(k, declared.iter().map(String::as_str)) {
                Some(c) => d.help(format!("did you mean --var {c}=...?")),
                None => d.help("check the variable's name; ${var.NAME} uses it"),
            });
        }
    }
    let vars = std::mem::take(&mut p.vars);
    let diags = p.diags;
    let stack = Stack {
        source,
        name,
        region,
        tags,
        tags_expr,
        backend,
        resources,
        by_address,
        outputs,
        vars,
        warnings: vec![],
        imports,
    };
    Ok((stack, diags))
}

fn valid_stack_name(n: &str) -> bool {
    let mut chars = n.chars();
    n.len() <= 31
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn m_span(root: &Table, table: &str, key: &str) -> Span {
    root.get(table)?.as_table()?.get(key)?.span()
}

impl Parser<'_> {
    /// Final variable values: `--var` beats `GPUSTACK_VAR_k` beats `[vars]`. A value given on the
    /// command line or in the environment takes the declared default's type.
    fn collect_vars(&mut self, root: &Table, src: &VarSources) {
        let mut declared: BTreeMap<String, Value> = BTreeMap::new();
        match root.get("vars") {
            Some(Item::Table(t)) => {
                for (k, item) in t.iter() {
                    match item {
                        Item::Value(v) => {
                            if let Some(val) = literal(v) {
                                declared.insert(k.to_string(), val);
                            }
                        }
                        _ => self
                            .diags
                            .push(Diagnostic::error(format!("variable `{k}` must be a plain value"), item.span())),
                    }
                }
            }
            Some(other) => self.diags.push(Diagnostic::error("`vars` must be a table: [vars]", other.span())),
            None => {}
        }
        let mut vars = declared.clone();
        let names: Vec<String> = declared.keys().cloned().collect();
        for name in names {
            if let Some(s) = (src.env)(&name) {
                vars.insert(name.clone(), typed_like(&declared[&name], &s));
            }
        }
        for (k, v) in src.cli {
            let val = match declared.get(k) {
                Some(d) => typed_like(d, v),
                None => Value::Str(v.clone()),
            };
            vars.insert(k.clone(), val);
        }
        self.vars = vars;
    }

    fn stack_string(&mut self, m: &BTreeMap<String, Expr>, key: &str, span: Span) -> String {
        match m.get(key) {
            Some(e) => match e.as_literal() {
                Some(Value::Str(s)) => s.clone(),
                _ => {
                    self.diags.push(Diagnostic::error(
                        format!("`stack.{key}` must be a string known before apply (variables are fine, resource outputs are not)"),
                        e.span.clone(),
                    ));
                    String::new()
                }
            },
            None => {
                self.diags.push(
                    Diagnostic::error(format!("missing required attribute `stack.{key}`"), span)
                        .help(format!("add `{key} = \"...\"` under [stack]")),
                );
                String::new()
            }
        }
    }

    fn kind_table(&mut self, kind: &'static dyn Schema, item: &Item, key_span: Span, out: &mut Vec<Resource>) {
        let Some(t) = item.as_table_like() else {
            self.diags.push(
                Diagnostic::error(format!("`{}` must hold named resources", kind.name()), item.span().or(key_span))
                    .help(format!("write [{}.NAME] followed by its attributes", kind.name())),
            );
            return;
        };
        let kinds = self.kinds;
        for (name, ritem) in t.iter() {
            let nspan = t.key(name).and_then(|k| k.span());
            let address = format!("{}.{name}", kind.name());
            let valid_name = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !valid_name {
                self.diags.push(
                    Diagnostic::error(format!("resource name `{name}` is not valid"), nspan.clone())
                        .help("names start with a letter and use letters, digits, '_' and '-'"),
                );
            }
            // A value with its own error (a variable without a value, an unclosed `${`) is
            // not checked further: one mistake, one error.
            let before = self.diags.len();
            let expr = self.item_expr(ritem, nspan.clone());
            let values_ok = self.diags.len() == before;
            let ExprKind::Table(mut attrs) = expr.kind else {
                self.diags.push(
                    Diagnostic::error(format!("`{address}` must be a table of attributes"), expr.span)
                        .help(format!("write [{address}] on its own line, then its attributes")),
                );
                continue;
            };
            let span = nspan.clone().or(expr.span.clone());
            let prevent_destroy_written = attrs.contains_key("prevent_destroy");
            let prevent_destroy = match attrs.remove("prevent_destroy") {
                Some(e) => match e.as_literal() {
                    Some(Value::Bool(b)) => *b,
                    _ => {
                        self.diags.push(Diagnostic::error("`prevent_destroy` must be true or false", e.span.clone()));
                        false
                    }
                },
                None => false,
            };
            let mut depends_on = vec![];
            if let Some(e) = attrs.remove("depends_on") {
                let literal = if e.as_single_ref().is_none() { Some(e.resolve(&|_| Value::Unknown)) } else { None };
                match literal.as_ref() {
                    Some(Value::List(items)) if items.iter().all(|v| v.as_str().is_some()) => {
                        depends_on = items
                            .iter()
                            .filter_map(|v| v.as_str())
                            .map(|a| OutputRef { address: a.to_string(), output: String::new(), span: e.span.clone() })
                            .collect();
                    }
                    _ => self.diags.push(
                        Diagnostic::error("`depends_on` must be a list of addresses", e.span.clone())
                            .help("write depends_on = [\"iam_role.node\"]"),
                    ),
                }
            }
            let mut schema_attrs = attrs;
            kind.complete(&mut schema_attrs);
            let out_ty = |r: &OutputRef| -> Option<Ty> {
                let (k, _) = r.address.split_once('.')?;
                let kind = kinds.iter().find(|x| x.name() == k)?;
                kind.outputs().iter().find(|(n, _)| *n == r.output).map(|(_, t)| *t)
            };
            let mut schema_diags = vec![];
            let valid_keys =
                kind.attrs().iter().filter(|a| !a.computed).map(|a| a.name).chain(META_KEYS.iter().copied());
            for (k, e) in &schema_attrs {
                match kind.attrs().iter().find(|a| a.name == k && !a.computed) {
                    Some(a) => schema::check(e, &a.ty, k, &out_ty, &mut schema_diags),
                    None => schema_diags.push(schema::unknown_key(k, e, valid_keys.clone(), &address)),
                }
            }
            // An object the stack reads but does not own (`existing`) needs nothing else.
            let reads = schema_attrs.contains_key("existing") && kind.attrs().iter().any(|a| a.name == "existing");
            for a in kind.attrs().iter().filter(|a| a.required && !reads && !schema_attrs.contains_key(a.name)) {
                schema_diags.push(
                    Diagnostic::error(format!("`{address}` is missing required attribute `{}`", a.name), span.clone())
                        .help(format!("add `{} = ...`", a.name)),
                );
            }
            let res = Resource {
                address,
                kind,
                name: name.to_string(),
                attrs: schema_attrs,
                prevent_destroy,
                prevent_destroy_written,
                span,
                depends_on,
                deps: vec![],
                values_ok,
                schema_ok: values_ok && schema_diags.is_empty(),
            };
            self.diags.extend(schema_diags);
            out.push(res);
        }
    }

    /// `[import]`: a table of `"kind.name" = "ID"`. Each address must be a resource of this
    /// file; each id a string, variables allowed, references not (an import is read before
    /// anything is created, so its id must be known when planning). Every problem reported.
    fn imports(&mut self, item: &Item, resources: &[Resource], by_address: &HashMap<String, usize>) -> Vec<ImportDecl> {
        let Some(t) = item.as_table_like() else {
            self.diags.push(
                Diagnostic::error("`import` must be a table: [import]", item.span())
                    .help("write [import] on its own line, then one \"kind.name\" = \"ID\" per object to take over"),
            );
            return vec![];
        };
        let mut out = vec![];
        for (key, v) in t.iter() {
            let key_span = t.key(key).and_then(|k| k.span());
            let expr = self.item_expr(v, key_span.clone());
            let span = expr.span.clone().or(key_span.clone());
            let known = by_address.contains_key(key);
            if !known {
                let d = if resources.iter().any(|r| r.kind.name() == key) || !key.contains('.') {
                    Diagnostic::error(format!("`[import]` key `{key}` is not a resource address"), key_span.clone())
                        .help("write the address of a resource of this file in quotes: \"node_group.gpu\" = \"my-cluster:gpu-ng\"")
                } else {
                    let d = Diagnostic::error(
                        format!("`[import]` names `{key}`, which is not a resource of this stack"),
                        key_span.clone(),
                    );
                    match closest(key, by_address.keys().map(String::as_str)) {
                        Some(c) => d.help(format!("did you mean `{c}`?")),
                        None => d.help(format!(
                            "declare the resource as [{key}] with the attributes it has, then import it here"
                        )),
                    }
                };
                self.diags.push(d);
                // `node_group.gpu = "…"` unquoted is a table `node_group`: one mistake, one error.
                if matches!(expr.kind, ExprKind::Table(_)) {
                    continue;
                }
            }
            let id = match (&expr.kind, expr.as_literal()) {
                (_, Some(Value::Str(s))) if !s.trim().is_empty() => Some(s.clone()),
                (_, Some(Value::Str(_))) => {
                    self.diags.push(
                        Diagnostic::error(format!("`[import]` `{key}`: the id is empty"), span.clone())
                            .help("write the id of the existing object (each kind's reference page gives its form)"),
                    );
                    None
                }
                (ExprKind::Template(_), _) => {
                    self.diags.push(
                        Diagnostic::error(
                            format!("`[import]` `{key}`: an import id cannot refer to another resource"),
                            span.clone(),
                        )
                        .help("imports are read before anything is created: write the id itself (variables, ${var.NAME}, are allowed)"),
                    );
                    None
                }
                _ => {
                    self.diags.push(
                        Diagnostic::error(format!("`[import]` `{key}`: the id must be a string"), span.clone())
                            .help(format!("write \"{key}\" = \"ID\" (each kind's reference page gives its id form)")),
                    );
                    None
                }
            };
            if let Some(id) = id.filter(|_| known) {
                out.push(ImportDecl { address: key.to_string(), id, key_span, span });
            }
        }
        out
    }

    fn outputs(&mut self, item: &Item) -> Vec<OutputDecl> {
        let Some(t) = item.as_table_like() else {
            self.diags.push(Diagnostic::error("`output` must be a table: [output]", item.span()));
            return vec![];
        };
        t.iter()
            .map(|(k, v)| {
                let ks = t.key(k).and_then(|k| k.span());
                OutputDecl { name: k.to_string(), expr: self.item_expr(v, ks) }
            })
            .collect()
    }

    /// Resolves each reference's target: the address must exist and have that output.
    /// Fills `deps` (sorted, unique) from references and `depends_on`.
    fn check_references(
        &mut self,
        resources: &mut [Resource],
        by_address: &HashMap<String, usize>,
        outputs: &[OutputDecl],
    ) {
        let kinds_of: Vec<&'static dyn Schema> = resources.iter().map(|r| r.kind).collect();
        let check = |r: &OutputRef, diags: &mut Vec<Diagnostic>| -> Option<usize> {
            let Some(&i) = by_address.get(&r.address) else {
                let d = Diagnostic::error(format!("reference to unknown resource `{}`", r.address), r.span.clone());
                diags.push(match closest(&r.address, by_address.keys().map(String::as_str)) {
                    Some(c) => d.help(format!("did you mean `{c}`?")),
                    None => d.help("declare it in this file as [KIND.NAME], or fix the address"),
                });
                return None;
            };
            if r.output.is_empty() {
                return Some(i);
            }
            let outs = kinds_of[i].outputs();
            if !outs.iter().any(|(n, _)| *n == r.output) {
                let names = outs.iter().map(|(n, _)| *n);
                let d = Diagnostic::error(format!("`{}` has no output `{}`", r.address, r.output), r.span.clone());
                diags.push(match closest(&r.output, names.clone()) {
                    Some(c) => d.help(format!(
                        "did you mean `{c}`? outputs of {}: {}",
                        kinds_of[i].name(),
                        names.collect::<Vec<_>>().join(", ")
                    )),
                    None => {
                        d.help(format!("outputs of {}: {}", kinds_of[i].name(), names.collect::<Vec<_>>().join(", ")))
                    }
                });
                return None;
            }
            Some(i)
        };
        for r in resources.iter_mut() {
            let mut refs = vec![];
            for e in r.attrs.values() {
                e.refs(&mut refs);
            }
            refs.extend(r.depends_on.iter().cloned());
            let mut deps: Vec<usize> = refs.iter().filter_map(|x| check(x, &mut self.diags)).collect();
            deps.sort_unstable();
            deps.dedup();
            r.deps = deps;
        }
        for o in outputs {
            let mut refs = vec![];
            o.expr.refs(&mut refs);
            for x in &refs {
                check(x, &mut self.diags);
            }
        }
    }

    /// Two resources of one kind must not get the same explicit physical name.
    fn check_physical_names(&mut self, resources: &[Resource], stack: &str) {
        let mut seen: HashMap<(&str, String), &str> = HashMap::new();
        for r in resources {
            let name = match r.attrs.get("name").and_then(Expr::as_literal) {
                Some(Value::Str(s)) => s.clone(),
                _ if r.kind.attrs().iter().any(|a| a.name == "name") => format!("{stack}-{}", r.name),
                _ => continue,
            };
            if let Some(first) = seen.insert((r.kind.name(), name.clone()), &r.address) {
                self.diags.push(
                    Diagnostic::error(
                        format!("`{}` and `{first}` would both be named \"{name}\"", r.address),
                        r.span.clone(),
                    )
                    .help("physical names of one kind must be unique in a stack; change `name`"),
                );
            }
        }
    }

    fn item_expr(&mut self, item: &Item, key_span: Span) -> Expr {
        match item {
            Item::Value(v) => self.value_expr(v, key_span),
            Item::Table(t) => self.table_expr(t, key_span),
            Item::ArrayOfTables(a) => {
                let items = a.iter().map(|t| self.table_expr(t, None)).collect();
                Expr { kind: ExprKind::List(items), span: a.span(), key_span }
            }
            Item::None => Expr::value(Value::Unknown, None),
        }
    }

    fn table_expr(&mut self, t: &Table, key_span: Span) -> Expr {
        let mut m = BTreeMap::new();
        for (k, v) in t.iter() {
            let ks = t.key(k).and_then(|k| k.span());
            m.insert(k.to_string(), self.item_expr(v, ks));
        }
        Expr { kind: ExprKind::Table(m), span: t.span().or(key_span.clone()), key_span }
    }

    fn value_expr(&mut self, v: &toml_edit::Value, key_span: Span) -> Expr {
        use toml_edit::Value as V;
        let span = v.span();
        let kind = match v {
            V::String(s) => return self.string_expr(s.value(), span, key_span),
            V::Array(a) => ExprKind::List(a.iter().map(|x| self.value_expr(x, None)).collect()),
            V::InlineTable(t) => {
                let mut m = BTreeMap::new();
                for (k, x) in t.iter() {
                    let ks = t.key(k).and_then(|k| k.span());
                    m.insert(k.to_string(), self.value_expr(x, ks));
                }
                ExprKind::Table(m)
            }
            other => ExprKind::Value(literal(other).unwrap_or(Value::Unknown)),
        };
        Expr { kind, span, key_span }
    }

    /// A string value: parses `${...}`, substitutes variables, keeps output references.
    fn string_expr(&mut self, s: &str, span: Span, key_span: Span) -> Expr {
        let parts = match parse_template(s) {
            Ok(p) => p,
            Err((off, msg)) => {
                let at = self.inner_span(&span, s, off, 2);
                self.diags.push(Diagnostic::error(msg, at).help("write `$${` for a literal `${`"));
                return Expr { kind: ExprKind::Value(Value::str(s)), span, key_span };
            }
        };
        if let [RawPart::Ref(RawRef::Var(name), off, len)] = parts.as_slice() {
            let v = self.var(name, self.inner_span(&span, s, *off, *len));
            return Expr { kind: ExprKind::Value(v), span, key_span };
        }
        let mut out: Vec<Part> = vec![];
        for p in parts {
            match p {
                RawPart::Lit(l) => push_lit(&mut out, &l),
                RawPart::Ref(RawRef::Var(name), off, len) => {
                    let v = self.var(&name, self.inner_span(&span, s, off, len));
                    push_lit(&mut out, &v.interpolate());
                }
                RawPart::Ref(RawRef::Output { address, output }, off, len) => {
                    out.push(Part::Ref(OutputRef { address, output, span: self.inner_span(&span, s, off, len) }))
                }
            }
        }
        let kind = match out.as_slice() {
            [] => ExprKind::Value(Value::str("")),
            [Part::Lit(l)] => ExprKind::Value(Value::str(l.clone())),
            _ => ExprKind::Template(out),
        };
        Expr { kind, span, key_span }
    }

    fn var(&mut self, name: &str, span: Span) -> Value {
        self.used_vars.insert(name.to_string());
        if !self.vars.contains_key(name)
            && let Some(v) = (self.env)(name)
        {
            self.vars.insert(name.to_string(), Value::Str(v));
        }
        match self.vars.get(name) {
            Some(v) => v.clone(),
            None => {
                self.diags.push(Diagnostic::error(format!("variable `{name}` has no value"), span).help(format!(
                    "declare it under [vars] with a default, pass --var {name}=VALUE, or set GPUSTACK_VAR_{name}"
                )));
                Value::str("")
            }
        }
    }

    /// The span of `s[off..off+len]` inside the source: found by searching the written
    /// string for that text. When the reference itself is written with escapes (`\u0024{`),
    /// the written text differs from the value: then the whole string's span.
    fn inner_span(&self, span: &Span, s: &str, off: usize, len: usize) -> Span {
        let whole = span.clone()?;
        let inner = || {
            let needle = s.get(off..off + len)?;
            let written = self.src.get(whole.clone())?;
            let nth = s[..off].matches(needle).count();
            let pos = written.match_indices(needle).nth(nth).map(|(i, _)| i)?;
            Some(whole.start + pos..whole.start + pos + needle.len())
        };
        inner().or(Some(whole))
    }
}

fn push_lit(out: &mut Vec<Part>, l: &str) {
    if let Some(Part::Lit(prev)) = out.last_mut() {
        prev.push_str(l);
    } else if !l.is_empty() {
        out.push(Part::Lit(l.to_string()));
    }
}

/// A TOML value without references. Datetimes become RFC 3339 strings.
fn literal(v: &toml_edit::Value) -> Option<Value> {
    use toml_edit::Value as V;
    Some(match v {
        V::String(s) => Value::Str(s.value().clone()),
        V::Integer(i) => Value::Int(*i.value()),
        V::Float(f) => Value::Float(*f.value()),
        V::Boolean(b) => Value::Bool(*b.value()),
        V::Datetime(d) => Value::Str(d.value().to_string()),
        V::Array(a) => Value::List(a.iter().filter_map(literal).collect()),
        V::InlineTable(t) => Value::Table(t.iter().filter_map(|(k, x)| Some((k.to_string(), literal(x)?))).collect()),
    })
}

/// A command-line or environment value, typed like the declared default.
fn typed_like(default: &Value, s: &str) -> Value {
    match default {
        Value::Int(_) => s.parse().map(Value::Int).unwrap_or_else(|_| Value::str(s)),
        Value::Float(_) => s.parse().map(Value::Float).unwrap_or_else(|_| Value::str(s)),
        Value::Bool(_) => s.parse().map(Value::Bool).unwrap_or_else(|_| Value::str(s)),
        Value::List(_) | Value::Table(_) => {
            serde_json::from_str(s).map(|j| Value::from_json(&j)).unwrap_or_else(|_| Value::str(s))
        }
        _ => Value::str(s),
    }
}
