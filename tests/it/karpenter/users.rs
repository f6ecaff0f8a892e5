//! Issue 19 gap 1: the pools Karpenter users write. `examples/karpenter-al2023.toml` (Karpenter's
//! default CPU pool, an AL2023 NVIDIA pool by GPU name and generation, an Inferentia2 pool)
//! applies against the emulator with its AL2023 alias pinned, renders documents that validate
//! against the v1.14.1 CRDs with the requirements, limits, root volume, instance store, kubelet
//! and tag selectors written, is in sync, and destroys. The refusals are checked offline
//! through `gpustack validate` (`super::validate` helpers).

use serde_json::json;

use super::validate::{accepted, pool, refused, stack, validate};
use super::{documents, files, repo, validate_manifests};
use crate::harness::Env;

#[test]
fn the_al2023_example_applies_pins_renders_valid_pools_and_destroys() {
    let env = Env::new();
    let file = repo().join("examples/karpenter-al2023.toml");
    let file = file.to_str().unwrap();
    let plan = env.ok(&["plan", file]);
    let said = format!("{}{}", plan.stdout, plan.stderr);
    // The plan says what the requirements admit and what the AL2023 nodes still need.
    assert!(said.contains("accelerated families among them: none (a CPU pool)"), "{said}");
    // g6f is dropped by `instance-gpu-count Gt 0`, as Karpenter labels it (count 0).
    assert!(said.contains("accelerated families among them: g5, g6, g6e;"), "{said}");
    assert!(!said.contains("counts as 0 GPUs"), "{said}");
    assert!(said.contains("AL2023 NVIDIA nodes: the AMI has the driver, not the device plugin"), "{said}");
    assert!(said.contains("Neuron nodes: install the Neuron device plugin"), "{said}");
    env.ok(&["apply", file, "--auto-approve"]);
    let st = env.state("karp-al2023-dev");
    let alias = st["resources"]["karpenter_pool.gpu"]["outputs"]["ami_alias"].as_str().unwrap().to_string();
    assert!(alias.starts_with("al2023@v") && alias.len() == "al2023@v20251029".len(), "pinned {alias}");
    let again = env.run(&["plan", "--detailed-exitcode", file]);
    assert_eq!(again.code, 0, "in sync after apply: {again:?}");

    env.ok(&["manifests", file, "--out", "k8s"]);
    let written = files(&env.path("k8s"));
    let default = documents(&written["karpenter/default.yaml"]);
    let (class, pool) = (&default[0]["spec"], &default[1]["spec"]);
    assert_eq!(class["amiSelectorTerms"], json!([{ "alias": alias }]));
    let cluster = st["resources"]["eks_cluster.main"]["outputs"]["name"].as_str().unwrap();
    assert_eq!(class["securityGroupSelectorTerms"], json!([{ "tags": { "aws:eks:cluster-name": cluster } }]));
    assert_eq!(
        class["blockDeviceMappings"],
        json!([{ "deviceName": "/dev/xvda", "ebs": { "volumeSize": "50Gi", "volumeType": "gp3", "encrypted": true, "deleteOnTermination": true } }])
    );
    // A CPU pool: its limits as written, no GPU limit, no taint, on-demand from the requirement.
    assert_eq!(pool["limits"], json!({ "cpu": 1000, "memory": "1000Gi" }));
    assert!(pool["template"]["spec"].get("taints").is_none());
    let reqs = pool["template"]["spec"]["requirements"].as_array().unwrap();
    assert_eq!(reqs[0], json!({ "key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"] }));
    assert_eq!(reqs.iter().filter(|r| r["key"] == "karpenter.sh/capacity-type").count(), 1, "{reqs:?}");
    assert!(
        reqs.contains(&json!({ "key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["2"] }))
    );

    let gpu = documents(&written["karpenter/gpu.yaml"]);
    assert_eq!(gpu[0]["spec"]["instanceStorePolicy"], "RAID0");
    assert_eq!(
        gpu[0]["spec"]["kubelet"],
        json!({ "imageGCHighThresholdPercent": 85, "imageGCLowThresholdPercent": 80 })
    );
    // Review r19 M1: the device plugin chart's default affinity finds the AL2023 GPU nodes;
    // the CPU and Neuron pools are not labelled.
    assert_eq!(gpu[1]["spec"]["template"]["metadata"]["labels"]["nvidia.com/gpu.present"], "true");
    assert!(pool["template"].get("metadata").is_none(), "{pool}");
    assert_eq!(gpu[0]["spec"]["blockDeviceMappings"][0]["ebs"]["iops"], 6000);
    assert!(gpu[0]["spec"].get("userData").is_none(), "no Bottlerocket user data on AL2023");
    assert_eq!(gpu[1]["spec"]["limits"], json!({ "nvidia.com/gpu": 16 }));
    let reqs = gpu[1]["spec"]["template"]["spec"]["requirements"].as_array().unwrap();
    assert!(reqs.contains(&json!({ "key": "node.kubernetes.io/instance-type", "operator": "Exists", "minValues": 3 })));
    let neuron = documents(&written["karpenter/neuron.yaml"]);
    assert_eq!(neuron[1]["spec"]["limits"], json!({ "aws.amazon.com/neuron": 12 }));

    let (valid, report) = validate_manifests(&env.path("k8s"));
    assert!(valid, "{report}");
    assert!(report.contains("6 of 6 document(s) valid"), "{report}");
    env.ok(&["destroy", file, "--auto-approve"]);
    assert_eq!(env.tagged("karp-al2023-dev").total(), 0);
}

const TAGGED: &str = "subnet_tags = { \"karpenter.sh/discovery\" = \"main\" }";

#[test]
fn requirements_follow_the_nodepool_crd_and_compose_with_the_pools_types() {
    let p = |body: &str| stack(&pool("p", &format!("{TAGGED}\n{body}")));
    refused(
        &p(
            "requirements = [{ key = \"karpenter.k8s.aws/instance-generation\", operator = \"Gt\", values = [\"4\", \"5\"] }]\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 1",
        ),
        "operator Gt takes a single non-negative integer value",
        "instance-generation",
        "e.g. { key = \"karpenter.k8s.aws/instance-generation\", operator = \"Gt\", values = [\"4\"] }",
    );
    refused(
        &p(
            "requirements = [{ key = \"karpenter.sh/nodepool\", operator = \"Exists\" }]\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 1",
        ),
        "requirement key \"karpenter.sh/nodepool\"",
        "karpenter.sh/nodepool",
        "use a well-known label",
    );
    refused(
        &p(
            "requirements = [{ key = \"karpenter.k8s.aws/instance-family\", operator = \"In\", values = [\"g6\"], min_values = 2 }]\ngpu_limit = 1",
        ),
        "min_values = 2 on \"karpenter.k8s.aws/instance-family\" asks for more values than the 1 listed",
        "min_values",
        "list at least that many values",
    );
    refused(
        &p(
            "requirements = [{ key = \"karpenter.k8s.aws/instance-size\", operator = \"In\", values = [\"48xlarge\"] }]\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 1",
        ),
        "its requirements exclude g6.xlarge of its instance_types: no listed type is left",
        "instance_types",
        "Karpenter ANDs every requirement",
    );
    refused(
        &p(
            "capacity_types = [\"spot\"]\nrequirements = [{ key = \"karpenter.sh/capacity-type\", operator = \"In\", values = [\"on-demand\"] }]\ninstance_types = [\"g6.xlarge\", \"g5.xlarge\", \"g6e.xlarge\"]\ngpu_limit = 1",
        ),
        "capacity_types (spot) and its karpenter.sh/capacity-type requirement (on-demand) disagree",
        "capacity-type",
        "keep one of the two",
    );
    // Requirements alone on GPU types: gpu_limit is required, as for listed types.
    refused(
        &p(
            "requirements = [{ key = \"karpenter.k8s.aws/instance-gpu-name\", operator = \"In\", values = [\"h100\"] }]",
        ),
        "launches NVIDIA GPUs but sets no gpu_limit",
        "karpenter_pool.p",
        "set gpu_limit",
    );
    // ...and gpu_limit on a CPU pool never binds.
    refused(
        &p(
            "requirements = [{ key = \"karpenter.k8s.aws/instance-category\", operator = \"In\", values = [\"c\", \"m\", \"r\"] }]\ngpu_limit = 4",
        ),
        "gpu_limit never binds",
        "gpu_limit",
        "remove gpu_limit",
    );
    accepted(
        &p(
            "requirements = [{ key = \"karpenter.k8s.aws/instance-category\", operator = \"In\", values = [\"c\", \"m\", \"r\"] }, { key = \"karpenter.k8s.aws/instance-generation\", operator = \"Gt\", values = [\"2\"] }]\nlimits = { cpu = 1000, memory = \"1000Gi\", nodes = 10 }",
        ),
        "gpu_limit",
    );
}

#[test]
fn node_class_fields_and_al2023_limits_are_checked_offline() {
    let p = |body: &str| stack(&pool("p", body));
    refused(
        &p("instance_types = [\"g6.xlarge\"]\ngpu_limit = 1"),
        "`karpenter_pool.p` selects no subnets",
        "karpenter_pool.p",
        "set subnets = [\"${subnet.a.id}\"] or subnet_tags",
    );
    refused(
        &p("subnets = [\"subnet_a\"]\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 1"),
        "\"subnet_a\" in subnets is not an id (subnet-…)",
        "subnet_a",
        "write an id",
    );
    refused(
        &p(&format!(
            "{TAGGED}\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 1\nlimits = {{ \"nvidia.com/gpu\" = 4 }}"
        )),
        "limits.\"nvidia.com/gpu\" conflicts with gpu_limit",
        "nvidia.com/gpu",
        "set gpu_limit = the most physical GPUs",
    );
    refused(
        &p(&format!(
            "{TAGGED}\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 1\nroot_volume = {{ size_gib = 100, type = \"gp2\", iops = 4000 }}"
        )),
        "root_volume sets iops on a gp2 volume",
        "iops",
        "use type = \"gp3\"",
    );
    refused(
        &p(&format!(
            "{TAGGED}\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 1\nkubelet = {{ eviction_soft = {{ \"memory.available\" = \"500Mi\" }} }}"
        )),
        "kubelet.eviction_soft \"memory.available\" has no eviction_soft_grace_period",
        "eviction_soft",
        "add eviction_soft_grace_period",
    );
    refused(
        &p(&format!("{TAGGED}\nami = \"al2023@latest\"\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 1")),
        "AL2023 nodes have no data volume",
        "data_volume",
        "size the one AL2023 volume with root_volume",
    );
    refused(
        &stack(&format!(
            "\n[karpenter_pool.p]\ncluster = \"${{eks_cluster.main.name}}\"\nnode_role = \"${{iam_role.node.name}}\"\nsecurity_groups = [\"sg-0abc\"]\n{TAGGED}\nami = \"al2023@latest\"\ninstance_types = [\"p5.48xlarge\"]\ngpu_limit = 8\ngpu_sharing = {{ strategy = \"mig\", mig_profile = {{ \"h100.80gb\" = \"1g.10gb\" }} }}\n"
        )),
        "gpu_sharing on an AL2023 pool is not rendered",
        "gpu_sharing",
        "MIG on AL2023 needs NVIDIA's MIG manager (the GPU Operator, kind gpu_operator)",
    );
    refused(
        &p(&format!("{TAGGED}\nami = \"al2023@2025\"\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 1")),
        "ami = \"al2023@2025\" is not an AMI alias gpustack renders",
        "al2023@2025",
        "use \"bottlerocket@latest\" or \"al2023@latest\"",
    );
    // AL2023 runs images from its root volume: a GPU pool without root_volume is warned.
    let bare = format!(
        "\n[karpenter_pool.p]\ncluster = \"${{eks_cluster.main.name}}\"\nnode_role = \"${{iam_role.node.name}}\"\nsecurity_groups = [\"sg-0abc\"]\n{TAGGED}\nami = \"al2023@latest\"\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 1\n"
    );
    let c = validate(&stack(&bare));
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert!(
        c.stderr.contains("on AL2023 with no `root_volume`: images and pods get Karpenter's 20 GiB default"),
        "{}",
        c.stderr
    );
    accepted(
        &stack(&bare.replace("gpu_limit = 1\n", "gpu_limit = 1\nroot_volume = { size_gib = 200 }\n")),
        "root_volume",
    );
    // Review r19 m7: the help's other way out, instance_store = "raid0", silences it too.
    accepted(&stack(&bare.replace("gpu_limit = 1\n", "gpu_limit = 1\ninstance_store = \"raid0\"\n")), "root_volume");
    // Literal ids and a reservation outside the stack are taken; tag selectors stand in for lists.
    accepted(
        &stack(
            "\n[karpenter_pool.p]\ncluster = \"${eks_cluster.main.name}\"\nnode_role = \"${iam_role.node.name}\"\nsecurity_group_tags = { \"karpenter.sh/discovery\" = \"main\" }\nsubnets = [\"subnet-0abc123\"]\ncapacity_reservations = [\"cr-0123456789abcdef0\"]\ninstance_types = [\"g6.xlarge\"]\ngpu_limit = 1\nami = \"al2023@v20251029\"\nroot_volume = { size_gib = 200 }\nmetadata_options = { http_tokens = \"required\", http_put_response_hop_limit = 1 }\n",
        ),
        "capacity_reservations takes this stack's reservations",
    );
}

/// Review r19 M2: a pool written with requirements alone is not called a CPU pool when the
/// catalog cannot tell (a GPU family newer than the file, a GPU/accelerator selector); the
/// accelerator labels derive Neuron types and the Neuron resource; a pool mixing NVIDIA and
/// Neuron types cannot be capped by one gpu_limit.
#[test]
fn requirements_the_catalog_cannot_answer_need_a_cap() {
    let p = |body: &str| stack(&pool("p", &format!("{TAGGED}\n{body}")));
    let gb200 =
        "requirements = [{ key = \"karpenter.k8s.aws/instance-family\", operator = \"In\", values = [\"p6e-gb200\"] }]";
    refused(
        &p(gb200),
        "gpustack cannot tell whether this pool launches GPUs or accelerators (karpenter.k8s.aws/instance-family names p6e-gb200, which the catalog does not know)",
        "requirements",
        "list instance_types or instance_families, or cap it",
    );
    accepted(&p(&format!("{gb200}\ngpu_limit = 72")), "cannot tell");
    // Karpenter's own default pool (c/m/r, 4–32 vCPUs, nitro, generation > 2) admits none of
    // the catalog's CPU sample, yet every key was evaluated and no accelerated type passes: a
    // CPU pool, not an uncapped one.
    let default_pool = "requirements = [\n  { key = \"karpenter.k8s.aws/instance-category\", operator = \"In\", values = [\"c\", \"m\", \"r\"] },\n  { key = \"karpenter.k8s.aws/instance-cpu\", operator = \"In\", values = [\"4\", \"8\", \"16\", \"32\"] },\n  { key = \"karpenter.k8s.aws/instance-hypervisor\", operator = \"In\", values = [\"nitro\"] },\n  { key = \"karpenter.k8s.aws/instance-generation\", operator = \"Gt\", values = [\"2\"] },\n]";
    accepted(&p(default_pool), "cannot tell");
    // Neuron by the accelerator labels: the Neuron resource is required and rendered.
    let neuron = "requirements = [{ key = \"karpenter.k8s.aws/instance-accelerator-manufacturer\", operator = \"In\", values = [\"aws\"] }]";
    refused(&p(neuron), "launches Neuron devices but sets no gpu_limit", "karpenter_pool.p", "set gpu_limit");
    accepted(&p(&format!("{neuron}\ngpu_limit = 16")), "gpu_limit");
    let c = validate(&p(&format!("{neuron}\nlimits = {{ \"aws.amazon.com/neuron\" = 16 }}")));
    assert_eq!(c.code, 0, "{}", c.stderr);
    // An accelerator selector whose set the catalog cannot fill is not a CPU pool.
    refused(
        &p(
            "requirements = [{ key = \"karpenter.k8s.aws/instance-accelerator-name\", operator = \"In\", values = [\"gaudi3\"] }]",
        ),
        "karpenter.k8s.aws/instance-accelerator-name In selects GPUs or accelerators",
        "requirements",
        "list instance_types or instance_families, or cap it",
    );
    refused(
        &p(
            "requirements = [{ key = \"karpenter.k8s.aws/instance-category\", operator = \"In\", values = [\"g\", \"inf\"] }]\ngpu_limit = 8",
        ),
        "may launch AMD and NVIDIA and Neuron types, but gpu_limit caps one resource",
        "gpu_limit = 8",
        "split it into one pool per accelerator maker",
    );
    // Karpenter labels g6f's GPU count 0: `gpu-count Gt 0` drops it as Karpenter does, and a
    // set that keeps it warns with the requirement that removes it.
    let l4 = "requirements = [{ key = \"karpenter.k8s.aws/instance-gpu-name\", operator = \"In\", values = [\"l4\"] }";
    let c = validate(&p(&format!("{l4}]\ngpu_limit = 8")));
    assert!(c.stderr.contains("its requirements admit g6f, gr6f, which Karpenter counts as 0 GPUs"), "{}", c.stderr);
    assert!(c.stderr.contains("operator = \"NotIn\", values = [\"g6f\", \"gr6f\"]"), "{}", c.stderr);
    accepted(
        &p(&format!(
            "{l4}, {{ key = \"karpenter.k8s.aws/instance-gpu-count\", operator = \"Gt\", values = [\"0\"] }}]\ngpu_limit = 8"
        )),
        "0 GPUs",
    );
}

/// Review r19 m2, m4, m5: an AL2023 root volume below the AMI's 20 GiB snapshot, a `limits`
/// key no node reports or a unitless memory, and more than 30 selector terms are refused or
/// warned offline.
#[test]
fn root_size_limit_keys_and_selector_counts_follow_ec2_and_the_crd() {
    let p = |body: &str| stack(&pool("p", &format!("{TAGGED}\n{body}")));
    let cpu = "requirements = [{ key = \"karpenter.k8s.aws/instance-category\", operator = \"In\", values = [\"c\", \"m\"] }]";
    refused(
        &p(&format!("{cpu}\nami = \"al2023@latest\"\nroot_volume = {{ size_gib = 10 }}")),
        "size_gib = 10 is below the AL2023 EKS AMI's 20 GiB root snapshot",
        "size_gib",
        "set size_gib = 20 or more",
    );
    // (The helper's data_volume is refused on AL2023 for its own reason; 20 GiB is not.)
    let c = validate(&p(&format!("{cpu}\nami = \"al2023@latest\"\nroot_volume = {{ size_gib = 20 }}")));
    assert!(
        c.stderr.contains("AL2023 nodes have no data volume") && !c.stderr.contains("root snapshot"),
        "{}",
        c.stderr
    );
    refused(
        &p(&format!("{cpu}\nlimits = {{ memory = 1000 }}")),
        "limits.memory without a unit is bytes",
        "1000",
        "write a unit, e.g. memory = \"1000Gi\"",
    );
    let c = validate(&p(&format!("{cpu}\nlimits = {{ gpu = 8, cpu = 100 }}")));
    assert!(c.stderr.contains("limits.gpu is a resource no node reports"), "{}", c.stderr);
    assert!(!c.stderr.contains("limits.cpu is a resource"), "{}", c.stderr);
    let ids: Vec<String> = (0..30).map(|i| format!("\"cr-0{i:016x}\"")).collect();
    refused(
        &p(&format!(
            "{cpu}\ncapacity_reservations = [{}]\ncapacity_reservation_tags = {{ team = \"ml\" }}",
            ids.join(", ")
        )),
        "capacity_reservations and capacity_reservation_tags make 31 selector terms; the EC2NodeClass takes at most 30",
        "capacity_reservations",
        "select them by tags",
    );
}

/// Review r19 m3: the CRD's kubeReserved/systemReserved CEL rules (keys cpu, memory,
/// ephemeral-storage, pid; no negative quantity) are checked offline.
#[test]
fn reserved_kubelet_resources_follow_the_crds_cel_rules() {
    let p = |body: &str| stack(&pool("p", &format!("{TAGGED}\n{body}")));
    let cpu = "requirements = [{ key = \"karpenter.k8s.aws/instance-category\", operator = \"In\", values = [\"c\", \"m\"] }]";
    refused(
        &p(&format!("{cpu}\nkubelet = {{ system_reserved = {{ gpu = \"1\" }} }}")),
        "kubelet.system_reserved has \"gpu\", which Karpenter does not take",
        "system_reserved",
        "use cpu, memory, ephemeral-storage or pid",
    );
    refused(
        &p(&format!("{cpu}\nkubelet = {{ kube_reserved = {{ memory = \"-1Gi\" }} }}")),
        "kubelet.kube_reserved.memory is negative",
        "-1Gi",
        "reserve 0 or more",
    );
    let c = validate(&p(&format!("{cpu}\nkubelet = {{ kube_reserved = {{ cpu = \"100m\", pid = \"100\" }} }}")));
    assert!(!c.stderr.contains("kube_reserved"), "{}", c.stderr);
}
