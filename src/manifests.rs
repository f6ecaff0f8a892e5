//! The Kubernetes side (DESIGN.md "The Kubernetes side"): the YAML of the stack's rendered
//! kinds, with the ids filled in from state, as files in a stable order. No AWS call and no
//! Kubernetes API call: the output is for GitOps or `kubectl apply -f`.

use std::collections::BTreeMap;

use crate::plan::desired_inputs;
use crate::resources;
use crate::stack::Stack;
use crate::state::State;
use crate::value::{Attrs, attrs_from_json};

/// One file `gpustack manifests` writes: its path under `--out`, and its text.
#[derive(Debug, PartialEq)]
pub struct File {
    pub path: String,
    pub text: String,
}

/// Every file of the stack's rendered resources, sorted by path, each holding its resources'
/// documents in the stack's order. Errors: one line per resource not applied yet.
pub fn render(stack: &Stack, state: &State) -> Result<Vec<File>, Vec<String>> {
    let outputs_of = |a: &str| state.resources.get(a).map(|e| attrs_from_json(&e.outputs));
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    let mut errors = vec![];
    for (idx, r) in stack.resources.iter().enumerate() {
        let kind = resources::of(r);
        if !kind.rendered() {
            continue;
        }
        let inputs: Attrs = desired_inputs(stack, idx, &outputs_of);
        let unknown: Vec<&str> = inputs.iter().filter(|(_, v)| !v.is_known()).map(|(k, _)| k.as_str()).collect();
        if !state.resources.contains_key(&r.address) || !unknown.is_empty() {
            let why = if unknown.is_empty() {
                "is not applied yet".to_string()
            } else {
                format!("uses values known only after apply ({})", unknown.join(", "))
            };
            errors.push(format!("`{}` {why}: run `gpustack apply` first, so its ids come from state", r.address));
            continue;
        }
        let outputs = outputs_of(&r.address).unwrap_or_default();
        if let Some(m) = kind.render(&r.address, &inputs, &outputs) {
            files.entry(m.file).or_default().push_str(&m.yaml);
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(files.into_iter().map(|(path, text)| File { path, text }).collect())
}
