//! `gpustack import generate` round trips (issue 20 items 2, 3): clusters built with boto3
//! directly (tests/emulator/brownfield.py, never gpustack), a stack file generated from them,
//! then `plan --detailed-exitcode` exits 0, apply only tags, a first change plans exactly that
//! update, and destroy deletes exactly what was imported but the Capacity Block.

use std::collections::BTreeSet;
use std::process::Command;

use crate::harness::{Env, block_on};

/// Builds a brownfield cluster in the env's emulator; the ids made, as JSON.
fn brownfield(env: &Env, scenario: &str, cluster: &str) -> serde_json::Value {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(repo.join("tests/emulator/.venv/bin/python"))
        .arg(repo.join("tests/emulator/brownfield.py"))
        .args(["--endpoint", &env.emu.url, "--scenario", scenario, "--cluster", cluster])
        .output()
        .expect("run brownfield.py");
    assert!(out.status.success(), "brownfield.py failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("brownfield.py prints JSON")
}

fn generate(env: &Env, cluster: &str, extra: &[&str]) -> String {
    let mut args = vec!["import", "generate", "--cluster", cluster, "--region", "us-west-2", "--out", "stack.toml"];
    args.extend_from_slice(extra);
    let r = env.ok(&args);
    assert!(r.stderr.contains("Wrote "), "{r:?}");
    std::fs::read_to_string(env.path("stack.toml")).unwrap()
}

/// `text` with `from` replaced by `to` on the line of `key` in `table`.
fn edit(text: &str, table: &str, key: &str, from: &str, to: &str) -> String {
    let mut inside = false;
    let lines: Vec<String> = text
        .lines()
        .map(|l| {
            if l.starts_with('[') {
                inside = l == table;
            }
            if inside && l.split('=').next().is_some_and(|k| k.trim() == key) {
                l.replace(from, to)
            } else {
                l.to_string()
            }
        })
        .collect();
    lines.join("\n") + "\n"
}

/// The lines of `table` (`[kind.name]`) in `text`.
fn table_lines(text: &str, table: &str) -> Vec<String> {
    text.lines().skip_while(|l| *l != table).skip(1).take_while(|l| !l.starts_with('[')).map(String::from).collect()
}

/// Actions that change nothing: reads, and the tag calls an import's apply makes.
fn read_or_tag(action: &str) -> bool {
    ["Describe", "List", "Get"].iter().any(|p| action.starts_with(p))
        || ["CreateTags", "TagResource", "TagRole", "TagOpenIDConnectProvider", "TagInstanceProfile", "AddTags"]
            .contains(&action)
}

/// Every import the file names, as its `[import]` rows ("address" = "id").
fn imports(text: &str) -> BTreeSet<String> {
    let section = text.split("\n[import]\n").nth(1).expect("an [import] table");
    section
        .lines()
        .take_while(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| l.split('=').next().unwrap().trim().trim_matches('"').to_string())
        .collect()
}

/// The file round-trips: plan exits 0, apply makes only tag calls and a second plan is still
/// clean. Returns the generated text.
fn round_trip(env: &Env, cluster: &str, extra: &[&str]) -> String {
    let text = generate(env, cluster, extra);
    // Generate only reads, with the actions its help and the README list or the kinds'
    // `actions()` (which `gpustack policy` prints).
    let documented: BTreeSet<String> = gpustack::generate::DISCOVERY_ACTIONS
        .iter()
        .map(|a| a.to_string())
        .chain(gpustack::resources::KINDS.iter().flat_map(|k| k.actions().iter().map(|a| a.to_string())))
        .collect();
    for (service, action) in env.emu.requests() {
        let read = ["Describe", "List", "Get"].iter().any(|p| action.starts_with(p));
        assert!(read, "generate only reads, but called {service}:{action}");
        assert!(documented.contains(&format!("{service}:{action}")), "{service}:{action} is not documented");
    }
    env.ok(&["validate", "stack.toml"]);
    let plan = env.run(&["plan", "stack.toml", "--detailed-exitcode"]);
    assert_eq!(plan.code, 0, "a generated file plans no change:\n{text}\n{plan:?}");
    env.emu.reset_requests();
    env.ok(&["apply", "stack.toml", "--auto-approve"]);
    let writes: Vec<(String, String)> = env.emu.requests().into_iter().filter(|(_, a)| !read_or_tag(a)).collect();
    assert!(writes.is_empty(), "apply of a generated file only tags: {writes:?}");
    let again = env.run(&["plan", "stack.toml", "--detailed-exitcode"]);
    assert_eq!(again.code, 0, "{again:?}");
    text
}

#[test]
fn eksctl_cluster_round_trips_and_scales() {
    let env = Env::new();
    let built = brownfield(&env, "eksctl", "prod-gpu");
    env.emu.reset_requests();
    let text = round_trip(&env, "prod-gpu", &[]);
    let imported = imports(&text);
    for want in [
        "eks_cluster.prod-gpu",
        "node_group.gpu",
        "eks_addon.vpc-cni",
        "eks_addon.coredns",
        "eks_addon.kube-proxy",
        "nat_gateway.nat",
        "pod_identity_association.ml_s3-reader",
    ] {
        assert!(imported.contains(want), "{want} not in {imported:?}\n{text}");
    }
    for kind in ["vpc.", "launch_template.", "capacity_reservation.", "eks_access_entry.", "security_group."] {
        assert!(imported.iter().any(|a| a.starts_with(kind)), "no {kind} in {imported:?}");
    }
    assert_eq!(imported.iter().filter(|a| a.starts_with("subnet.")).count(), 6, "{imported:?}");
    assert_eq!(imported.iter().filter(|a| a.starts_with("iam_role.")).count(), 3, "{imported:?}");
    // The node role's access entry is EKS's, made and removed with the node group: not imported.
    let entries: Vec<&String> = imported.iter().filter(|a| a.starts_with("eks_access_entry.")).collect();
    assert_eq!(entries.len(), 1, "only the operator's entry: {entries:?}");
    assert!(!text.contains("type          = \"EC2_LINUX\""), "{text}");
    // The operator's role is only named by the access entry: it stays outside the stack.
    assert!(!text.contains("iam_role.ops"), "{text}");
    let protected = |table: &str| {
        table_lines(&text, table).iter().any(|l| l.starts_with("prevent_destroy") && l.ends_with("= true"))
    };
    assert!(protected("[eks_cluster.prod-gpu]"), "{text}");
    let odcr = imported.iter().find(|a| a.starts_with("capacity_reservation.")).unwrap();
    assert!(protected(&format!("[{odcr}]")), "{text}");
    assert!(!protected("[node_group.gpu]"), "{text}");
    // The cluster's own security group is an output, not an import.
    let import_table = text.split("\n[import]\n").nth(1).unwrap();
    assert!(!import_table.contains(built["cluster_sg"].as_str().unwrap()), "{import_table}");

    // A first change: let the GPU node group grow (the autoscaler owns `desired`; `max` is the
    // file's), and exactly that is planned.
    let scaled = edit(&text, "[node_group.gpu]", "scaling", "max = 2", "max = 4");
    assert_ne!(scaled, text, "the node group's scaling line is as expected:\n{text}");
    env.write("stack.toml", &scaled);
    let plan = env.run(&["plan", "stack.toml", "--detailed-exitcode", "--json"]);
    assert_eq!(plan.code, 2, "{plan:?}");
    let changes: serde_json::Value = serde_json::from_str(&plan.stdout).unwrap();
    let changed: Vec<String> = changes["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["action"] != "no-op" && c["action"] != "read")
        .map(|c| format!("{} {}", c["action"].as_str().unwrap_or(""), c["address"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(changed, vec!["update node_group.gpu".to_string()], "{}", plan.stdout);
    env.ok(&["apply", "stack.toml", "--auto-approve"]);
    let eks = env.emu.eks();
    let ng = block_on(eks.describe_nodegroup().cluster_name("prod-gpu").nodegroup_name("gpu").send()).unwrap();
    assert_eq!(ng.nodegroup.unwrap().scaling_config.unwrap().max_size, Some(4));

    // Destroy, once protection is released: everything imported goes, the ODCR is cancelled,
    // the operator's role (never imported) stays.
    let released: Vec<&str> = scaled.lines().filter(|l| !l.starts_with("prevent_destroy")).collect();
    env.write("stack.toml", &(released.join("\n") + "\n"));
    env.ok(&["apply", "stack.toml", "--auto-approve"]);
    env.ok(&["destroy", "stack.toml", "--auto-approve"]);
    let remaining = leftovers(&env, &built);
    assert_eq!(remaining, vec![format!("iam_role {}", built["outside"]["roles"][0].as_str().unwrap())]);
}

#[test]
fn terraform_cluster_with_a_capacity_block_round_trips_and_keeps_the_block() {
    let env = Env::new();
    let built = brownfield(&env, "terraform", "tf-gpu");
    env.emu.reset_requests();
    let text = round_trip(&env, "tf-gpu", &["--no-prevent-destroy"]);
    let imported = imports(&text);
    assert!(imported.iter().any(|a| a.starts_with("capacity_block.")), "{imported:?}\n{text}");
    assert!(imported.iter().any(|a| a.starts_with("oidc_provider.")), "{imported:?}");
    assert!(!text.contains("prevent_destroy"), "{text}");
    assert!(text.contains("ami_type") && text.contains("BOTTLEROCKET_x86_64_NVIDIA"), "{text}");
    // --json without --out: the file and what was imported, for a pipeline.
    let json = env.ok(&["import", "generate", "--cluster", "tf-gpu", "--region", "us-west-2", "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&json.stdout).expect("one JSON document");
    assert_eq!(doc["valid"], true, "{doc}");
    assert!(doc["text"].as_str().unwrap().contains("[import]"), "{doc}");
    let addresses: BTreeSet<String> =
        doc["imported"].as_array().unwrap().iter().map(|o| o["address"].as_str().unwrap().to_string()).collect();
    assert_eq!(addresses, imported);
    let purchases = env.emu.purchases();
    env.ok(&["destroy", "stack.toml", "--auto-approve"]);
    assert_eq!(env.emu.purchases(), purchases, "nothing bought");
    let remaining = leftovers(&env, &built);
    let block = built["capacity_blocks"][0].as_str().unwrap();
    let mut want =
        vec![format!("capacity_block {block}"), format!("iam_role {}", built["outside"]["roles"][0].as_str().unwrap())];
    want.sort();
    assert_eq!(remaining, want);
}

/// Review imp-gen B1: terraform-aws-modules/vpc with `one_nat_gateway_per_az` (a NAT gateway in
/// each public subnet, which has MapPublicIpOnLaunch off) plans clean too, and destroys whole.
#[test]
fn terraform_vpc_with_a_nat_gateway_per_zone_round_trips() {
    let env = Env::new();
    let built = brownfield(&env, "terraform-per-az", "tf-az");
    env.emu.reset_requests();
    let text = round_trip(&env, "tf-az", &["--no-prevent-destroy"]);
    let imported = imports(&text);
    assert_eq!(imported.iter().filter(|a| a.starts_with("nat_gateway.")).count(), 2, "{imported:?}\n{text}");
    env.ok(&["destroy", "stack.toml", "--auto-approve"]);
    let remaining = leftovers(&env, &built);
    let block = built["capacity_blocks"][0].as_str().unwrap();
    let mut want =
        vec![format!("capacity_block {block}"), format!("iam_role {}", built["outside"]["roles"][0].as_str().unwrap())];
    want.sort();
    assert_eq!(remaining, want);
}

#[test]
fn generate_refuses_to_overwrite_and_names_an_unknown_cluster() {
    let env = Env::new();
    env.write("stack.toml", "keep me");
    let r = env.run(&["import", "generate", "--cluster", "nope", "--region", "us-west-2", "--out", "stack.toml"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("--force"), "{r:?}");
    assert_eq!(std::fs::read_to_string(env.path("stack.toml")).unwrap(), "keep me");
    let r = env.run(&["import", "generate", "--cluster", "nope", "--region", "us-west-2"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("no EKS cluster named nope"), "{r:?}");
    let r = env.run(&["import", "generate", "--help"]);
    assert!(r.stdout.contains("--no-prevent-destroy") && r.stdout.contains("--force"), "{r:?}");
}

/// What is left in the emulator of what `built` made: "kind id" for each object that still
/// exists (clusters, VPC objects, roles, templates, reservations that are not cancelled).
fn leftovers(env: &Env, built: &serde_json::Value) -> Vec<String> {
    let ec2 = env.emu.ec2();
    let iam = env.emu.iam();
    let eks = env.emu.eks();
    let strs = |k: &str| -> Vec<String> {
        match &built[k] {
            serde_json::Value::Array(a) => a.iter().filter_map(|v| v.as_str().map(String::from)).collect(),
            serde_json::Value::String(s) => vec![s.clone()],
            _ => vec![],
        }
    };
    let mut roles = strs("roles");
    roles.extend(built["outside"]["roles"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()));
    let mut left = vec![];
    block_on(async {
        if eks.describe_cluster().name(built["cluster"].as_str().unwrap()).send().await.is_ok() {
            left.push(format!("eks_cluster {}", built["cluster"]));
        }
        let vpcs = ec2.describe_vpcs().send().await.unwrap();
        for v in vpcs.vpcs() {
            if strs("vpc").contains(&v.vpc_id().unwrap().to_string()) {
                left.push(format!("vpc {}", v.vpc_id().unwrap()));
            }
        }
        let subnets = ec2.describe_subnets().send().await.unwrap();
        let mine: Vec<String> = strs("public").into_iter().chain(strs("private")).collect();
        for s in subnets.subnets() {
            if mine.contains(&s.subnet_id().unwrap().to_string()) {
                left.push(format!("subnet {}", s.subnet_id().unwrap()));
            }
        }
        let nats = ec2.describe_nat_gateways().send().await.unwrap();
        for n in nats.nat_gateways() {
            let gone = matches!(
                n.state(),
                Some(aws_sdk_ec2::types::NatGatewayState::Deleted | aws_sdk_ec2::types::NatGatewayState::Deleting)
            );
            if !gone && strs("nat").contains(&n.nat_gateway_id().unwrap().to_string()) {
                left.push(format!("nat_gateway {}", n.nat_gateway_id().unwrap()));
            }
        }
        for r in &roles {
            if iam.get_role().role_name(r).send().await.is_ok() {
                left.push(format!("iam_role {r}"));
            }
        }
        let lts = ec2.describe_launch_templates().send().await.unwrap();
        for t in lts.launch_templates() {
            if strs("launch_templates").contains(&t.launch_template_id().unwrap().to_string()) {
                left.push(format!("launch_template {}", t.launch_template_id().unwrap()));
            }
        }
        let crs = ec2.describe_capacity_reservations().send().await.unwrap();
        for c in crs.capacity_reservations() {
            let id = c.capacity_reservation_id().unwrap().to_string();
            let live = !matches!(c.state(), Some(aws_sdk_ec2::types::CapacityReservationState::Cancelled));
            if live && strs("capacity_reservations").contains(&id) {
                left.push(format!("capacity_reservation {id}"));
            }
            if live && strs("capacity_blocks").contains(&id) {
                left.push(format!("capacity_block {id}"));
            }
        }
    });
    left.sort();
    left
}
