//! What the embedded catalog must cover: every current accelerated family, and every GPU
//! type gpustack's rules, catalog code, stacks and examples name. A type missing from the
//! embedded catalog is not checked offline (`validate`, `plan --refresh=false`), so a
//! missing one silently turns the GPU rules off for it.

use std::path::Path;

use super::{EMBEDDED_JSON, parse_embedded};

/// EC2's accelerated computing families of today, by kind (EC2 instance types guide,
/// "Accelerated computing"; families from `DescribeInstanceTypes`).
const FAMILIES: &[&str] = &[
    // P: NVIDIA training GPUs.
    "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300",
    // G: NVIDIA and AMD graphics and inference GPUs.
    "g4dn", "g4ad", "g5", "g5g", "g6", "g6e", "g6f", "gr6", "gr6f", "g7", "g7e",
    // Trainium, Inferentia, and DL (Habana Gaudi, Qualcomm AI 100).
    "trn1", "trn1n", "trn2", "trn2u", "inf1", "inf2", "dl1", "dl2q",
];

/// Names in gpustack's sources that are not embedded on purpose: a misspelt type that a test
/// shows is left to a refreshing plan; p6e-gb200 / p6e-gb300, which no source the generator
/// reads has a DescribeInstanceTypes record for, and a made-up future family (p9), which tests
/// show are unknown offline, not CPU-only (review r18 M2).
const NOT_TYPES: &[&str] = &["p5.49xlarge", "p6e-gb200.36xlarge", "p6e-gb300.36xlarge", "p9.48xlarge"];

#[test]
fn every_current_accelerated_family_is_embedded() {
    let c = parse_embedded(EMBEDDED_JSON).unwrap();
    for family in FAMILIES {
        assert!(c.accelerated_family(family), "no accelerated type of family {family} in the embedded catalog");
        assert!(c.types.keys().any(|t| t.split('.').next() == Some(family)), "{family}");
    }
    // p3 and dl1 are no longer in moto's copy: Karpenter's reference supplies them.
    let p3 = c.get("p3.16xlarge").unwrap();
    assert_eq!((p3.gpus, p3.gpu_model.as_deref(), p3.vcpus), (8, Some("V100"), 64));
    let dl1 = c.get("dl1.24xlarge").unwrap();
    assert_eq!((dl1.gpus, dl1.gpu_manufacturer.as_deref(), dl1.max_efa_interfaces), (8, Some("Habana"), 4));
    assert!(!c.get("g4ad.xlarge").unwrap().is_nvidia(), "an AMD GPU");
    assert!(!c.accelerated_family("m6i.large") && !c.accelerated_family("c5n.18xlarge"));
    // trn2u's record has no NeuronInfo; it is a Trainium2 family all the same (review r18 m1).
    assert!(c.accelerated_family("trn2u.48xlarge") && !c.cpu_only_family("trn2u.48xlarge"));
}

/// Instance type names ("p5.48xlarge") of accelerated families in `text`.
fn accelerated_types(text: &str) -> Vec<String> {
    let accelerated = |family: &str| {
        ["p", "g", "gr", "trn", "inf", "dl"]
            .iter()
            .any(|k| family.strip_prefix(k).is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit())))
    };
    let size = |s: &str| s.ends_with("large") || s.starts_with("metal");
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '-'))
        .map(|w| w.trim_matches(|c| c == '.' || c == '-'))
        .filter_map(|w| w.split_once('.').filter(|(f, s)| accelerated(f) && size(s) && !s.contains('.')).map(|_| w))
        .map(str::to_string)
        .collect()
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs" || e == "toml") {
            out.push(path);
        }
    }
}

#[test]
fn every_gpu_type_gpustack_names_is_embedded() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut paths = vec![];
    for dir in ["src/rules", "src/aws/catalog", "examples", "stacks"] {
        files(&root.join(dir), &mut paths);
    }
    let c = parse_embedded(EMBEDDED_JSON).unwrap();
    let mut missing = vec![];
    let mut seen = 0;
    for path in &paths {
        for t in accelerated_types(&std::fs::read_to_string(path).unwrap()) {
            seen += 1;
            if c.get(&t).is_none() && !NOT_TYPES.contains(&t.as_str()) {
                missing.push(format!("{t} ({})", path.strip_prefix(root).unwrap_or(path).display()));
            }
        }
    }
    assert!(seen > 50, "the scan found only {seen} type names");
    assert!(missing.is_empty(), "GPU types named but not in the embedded catalog: {missing:?}");
}

#[test]
fn type_names_are_found_in_code_and_stacks() {
    let text = "instance_type = \"p5.48xlarge\"\n(\"g6f.large\", 1), ml.p5.48xlarge p6-b200.48xlarge, m6i.large c8gb.metal-24xl";
    assert_eq!(accelerated_types(text), ["p5.48xlarge", "g6f.large", "p6-b200.48xlarge"]);
}
