//! The GPU rules of a `karpenter_pool` (issue 18): its `gpu_limit` counted as its nodes report
//! GPUs (shares and MIG slices included) and covering its reservations, required where it
//! binds; types Karpenter counts as 0 GPUs; shared pools and multi-GPU sizes or whole-GPU
//! taints; pools tied on weight and taints. Sources: `docs/karpenter-pools.md`.

use std::collections::BTreeSet;

use super::{capacity_types, family, pools, reservations, taints};
use crate::aws::catalog::InstanceInfo;
use crate::resources::karpenter_pool::advertised_per_gpu;
use crate::rules::{lit, lit_str, span, strings};
use crate::stack::{Diagnostic, Resource, Stack};

/// Types whose GPUs `DescribeInstanceTypes` reports with `Count: 0`, which Karpenter v1.14.1
/// reads as 0 `nvidia.com/gpu` (`nvidiaGPUs` sums `*gpu.Count` only:
/// karpenter-provider-aws `pkg/providers/instancetype/types.go`). aws/karpenter-provider-aws#8368
/// (open): "Karpenter will **not** provision these instance types for workloads with
/// `nvidia.com/gpu` resource requests" and "**may** exceed NodePool limits for
/// `nvidia.com/gpu`"; it names the g6f family and p5.4xlarge. gr6f reports the same 0
/// (gpustack's catalog override table; zalando-incubator/kubernetes-on-aws#9848 disables it
/// for "the same karpenter scheduling issue as g6f"). Kept here, not read from the catalog,
/// because the catalog corrects the count for everything else.
const ZERO_GPU_TYPES: &[&str] = &["p5.4xlarge"];
const ZERO_GPU_FAMILIES: &[&str] = &["g6f", "gr6f"];

/// A pool listing a type Karpenter counts as 0 GPUs (see [`ZERO_GPU_TYPES`]).
pub(super) fn zero_gpu_types(pool: &Resource, d: &mut Vec<Diagnostic>) {
    for k in ["instance_types", "instance_families"] {
        let zero: Vec<String> = strings(lit(pool, k))
            .into_iter()
            .filter(|t| ZERO_GPU_TYPES.contains(&t.as_str()) || ZERO_GPU_FAMILIES.contains(&family(t)))
            .collect();
        if !zero.is_empty() {
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}`: Karpenter counts {} as 0 GPUs (EC2 reports their GPU Count as 0): it never launches them for pods that request nvidia.com/gpu, may launch them for pods that do not, and may overrun gpu_limit (aws/karpenter-provider-aws#8368)",
                        pool.address,
                        zero.join(", ")
                    ),
                    span(pool, k),
                )
                .help("remove them from the pool; run them in a node_group (gpustack counts their GPUs from LogicalGpuCount)"),
            );
        }
    }
}

/// The strategy of a pool's `gpu_sharing`, when it shares GPUs.
pub(super) fn shared(pool: &Resource) -> Option<String> {
    crate::rules::catalog::sharing(pool).map(|s| s.strategy)
}

/// The taint that keeps whole-GPU pods off a pool of shared GPUs. A pool advertises shared
/// GPUs as `nvidia.com/gpu` (Karpenter scales only for that name), and EKS's
/// ExtendedResourceToleration admission plugin makes every pod requesting `nvidia.com/gpu`
/// tolerate taints keyed `nvidia.com/gpu` (Kubernetes docs, admission controllers,
/// "ExtendedResourceToleration"; enabled on every EKS platform version: EKS UG
/// `platform-versions`). `nvidia.com/gpu.shared` is tolerated automatically only by pods that
/// request `nvidia.com/gpu.shared`, the name shared GPUs have on Bottlerocket node groups.
pub const SHARED_TAINT: &str = "nvidia.com/gpu.shared";

/// A pool sharing GPUs without a taint that whole-GPU pods do not tolerate by themselves.
pub(super) fn shared_taint(pool: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(strategy) = shared(pool) else { return };
    if taints(pool, "node_taints").iter().any(|(k, _, _)| k != "nvidia.com/gpu") {
        return;
    }
    d.push(
        Diagnostic::warning(
            format!(
                "`{}` shares GPUs ({strategy}) as nvidia.com/gpu, and every pod that requests nvidia.com/gpu tolerates its taints: a pod that expects a whole GPU can land on a shared one",
                pool.address
            ),
            span(pool, "gpu_sharing"),
        )
        .help(format!(
            "add node_taints = [{{ key = \"{SHARED_TAINT}\", value = \"true\", effect = \"NO_SCHEDULE\" }}] and tolerate it in the pods meant for shared GPUs"
        )),
    );
}

/// The weight Karpenter gives a pool: as written, or gpustack's default.
fn weight(pool: &Resource) -> i64 {
    lit(pool, "weight").and_then(|v| v.as_int()).unwrap_or_else(|| {
        let capacity = capacity_types(pool);
        let capacity: Vec<&str> = capacity.iter().map(String::as_str).collect();
        let training = crate::resources::karpenter_pool::training(|k| pool.attrs.contains_key(k));
        crate::resources::karpenter_pool::default_weight(&capacity, training)
    })
}

/// A pool's taints as a set, for comparing pools.
fn taint_set(pool: &Resource) -> BTreeSet<(String, String, String)> {
    taints(pool, "node_taints").into_iter().collect()
}

/// Pools of one cluster with the same weight and the same taints: a pod that selects neither
/// (no nodeSelector, the same tolerations) may go to either, and Karpenter breaks the tie by
/// name, "the NodePool with the name later in the alphabet will come first"
/// (kubernetes-sigs/karpenter v1.14.1 `pkg/utils/nodepool/nodepool.go`, `OrderByWeight`),
/// which can put an inference pod on a training Capacity Block.
pub(super) fn tied_pools(stack: &Stack, d: &mut Vec<Diagnostic>) {
    let all: Vec<&Resource> = pools(stack).collect();
    for (i, later) in all.iter().enumerate() {
        let Some(first) = all[..i].iter().find(|p| {
            crate::rules::same_object(p.attrs.get("cluster"), later.attrs.get("cluster"))
                && weight(p) == weight(later)
                && taint_set(p) == taint_set(later)
        }) else {
            continue;
        };
        d.push(
            Diagnostic::warning(
                format!(
                    "`{}` and `{}` have the same weight ({}) and the same taints: a pod that selects neither may land on either, whichever Karpenter sorts first by name",
                    first.address,
                    later.address,
                    weight(later)
                ),
                span(later, if later.attrs.contains_key("weight") { "weight" } else { "node_taints" }),
            )
            .help("give the pools different weights (higher fills first), or each its own workload taint, e.g. node_taints = [{ key = \"gpustack.io/workload\", value = \"training\", effect = \"NO_SCHEDULE\" }]"),
        );
    }
}

/// The pool's `gpu_sharing` as written, for [`advertised_per_gpu`].
pub(super) fn sharing_table(pool: &Resource) -> Option<crate::value::Attrs> {
    lit(pool, "gpu_sharing").and_then(|v| v.as_table().cloned())
}

/// Issue 18 item 21: `gpu_limit` is required where it binds and refused where it cannot.
/// Karpenter charges a NodePool's limits with what its nodes report
/// (kubernetes-sigs/karpenter v1.14.1 `pkg/controllers/state/statenode.go` `Capacity()`):
/// `nvidia.com/gpu` on NVIDIA types, `aws.amazon.com/neuron` on Inferentia and Trainium
/// (karpenter-provider-aws v1.14.1 `pkg/providers/instancetype/types.go`), nothing on others.
/// A family's GPU maker is the embedded catalog's, else AMD for the AMD families, else NVIDIA
/// for a P or G family (`karpenter_pool::gpu_maker`; review r18 m7: g4ad is AMD, which
/// Karpenter reports as `amd.com/gpu`).
pub(super) fn gpu_limit_binds(pool: &Resource, known: &[(String, InstanceInfo)], d: &mut Vec<Diagnostic>) {
    use crate::resources::karpenter_pool::{gpu_maker, limit_resource};
    let l = super::launchable(pool);
    let (types, families) = (l.types, l.families);
    let resource = limit_resource(&types, &families);
    let neuron = resource == "aws.amazon.com/neuron";
    let amd = resource == "amd.com/gpu";
    let nvidia = known.iter().any(|(_, i)| i.is_nvidia()) || families.iter().any(|f| gpu_maker(f) == Some("NVIDIA"));
    // A GPU resource in `limits` caps the pool too (without gpu_sharing: the checks refuse
    // it with sharing or beside gpu_limit).
    let limits = lit(pool, "limits");
    let in_limits = limits.as_ref().and_then(|v| v.as_table()).is_some_and(|t| t.contains_key(resource));
    let written = pool.attrs.contains_key("gpu_limit");
    if !written && !in_limits && (nvidia || neuron || amd) {
        let what = if neuron {
            "Neuron devices"
        } else if amd {
            "AMD GPUs"
        } else {
            "NVIDIA GPUs"
        };
        d.push(
            Diagnostic::error(
                format!("`{}` launches {what} but sets no gpu_limit: nothing caps how many it starts", pool.address),
                pool.span.clone(),
            )
            .help("set gpu_limit = the most physical GPUs (or Neuron devices) the pool may run at once, e.g. gpu_limit = 16"),
        );
    }
    let all_known = !types.is_empty() && known.len() == types.len();
    if written && !nvidia && !neuron && !amd && (all_known || !families.is_empty()) {
        d.push(
            Diagnostic::error(
                format!("`{}`: gpu_limit never binds: its instance types report no nvidia.com/gpu or aws.amazon.com/neuron, which is what Karpenter counts the limit in", pool.address),
                span(pool, "gpu_limit"),
            )
            .help("remove gpu_limit from this pool (a CPU pool renders no limit), or list GPU types"),
        );
    }
}

/// Issue 18 item 1: the rendered limit admits at least one instance of each type, both as the
/// node reports them: `gpu_limit` × what one physical GPU is advertised as, against the type's
/// GPUs × the same for its GPU model ([`advertised_per_gpu`]).
pub(super) fn limit_admits_one_instance(
    pool: &Resource,
    known: &[(String, InstanceInfo)],
    limit: Option<i64>,
    d: &mut Vec<Diagnostic>,
) {
    let Some(limit) = limit else { return };
    let sharing = sharing_table(pool);
    let rendered = limit.saturating_mul(advertised_per_gpu(sharing.as_ref(), None));
    let nvidia: Vec<&(String, InstanceInfo)> = known.iter().filter(|(_, i)| i.is_nvidia()).collect();
    // Types derived from requirements: Karpenter picks among them, so only a limit that no
    // type fits is a pool that never launches.
    if super::launchable(pool).derived {
        let fits = |(_, i): &&(String, InstanceInfo)| {
            i64::from(i.gpus) * advertised_per_gpu(sharing.as_ref(), i.mig_model().map(|m| m.key)) <= rendered
        };
        if nvidia.is_empty() || nvidia.iter().any(fits) {
            return;
        }
    }
    for (t, i) in nvidia {
        let per_gpu = advertised_per_gpu(sharing.as_ref(), i.mig_model().map(|m| m.key));
        let reported = i64::from(i.gpus) * per_gpu;
        if rendered < reported {
            let counted = if per_gpu > 1 { format!(" ({} GPUs × {per_gpu} shares)", i.gpus) } else { String::new() };
            d.push(
                Diagnostic::error(
                    format!(
                        "`{}`: gpu_limit = {limit} renders limits nvidia.com/gpu: {rendered}, less than the {reported} one {t} reports{counted}: Karpenter could never launch it",
                        pool.address
                    ),
                    span(pool, "gpu_limit"),
                )
                .help(format!("set gpu_limit ≥ {} (a multiple of it, for whole nodes), or drop {t}", i.gpus)),
            );
        }
    }
}

/// Issue 18 item 1: every instance of the pool's reservations fits under its limit. A
/// registered node is charged to the limit (see [`limit_admits_one_instance`]), so with
/// `gpu_limit` below the reserved GPUs the rest of the paid reservation idles.
pub(super) fn reservations_launchable(
    stack: &Stack,
    pool: &Resource,
    info: &dyn Fn(&str) -> Option<InstanceInfo>,
    limit: i64,
    d: &mut Vec<Diagnostic>,
) {
    let mut reserved = 0;
    let mut parts = vec![];
    for res in reservations(stack, pool).into_iter().flatten() {
        let (Some(t), Some(n)) = (lit_str(res, "instance_type"), lit(res, "instance_count").and_then(|v| v.as_int()))
        else {
            continue;
        };
        let Some(gpus) = info(&t).map(|i| i64::from(i.gpus)).filter(|g| *g > 0) else { continue };
        reserved += n * gpus;
        parts.push(format!("{n} × {t} ({gpus} GPUs) in `{}`", res.address));
    }
    if limit < reserved {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}`: gpu_limit = {limit} is less than the {reserved} GPUs it reserves ({}): the reservation's other instances could never launch, and bill idle",
                    pool.address,
                    parts.join(", ")
                ),
                span(pool, "gpu_limit"),
            )
            .help(format!("set gpu_limit ≥ {reserved} (physical GPUs; the rendered limit accounts for gpu_sharing)")),
        );
    }
}

/// Issue 18 item 5: a shared pool and multi-GPU sizes. Karpenter sizes nodes by physical GPUs
/// (karpenter-provider-aws v1.14.1 `types.go` `nvidiaGPUs`; sharing is not modelled:
/// kubernetes-sigs/karpenter#729), so a pod asking for several `nvidia.com/gpu` gets a
/// multi-GPU size, where Bottlerocket's plugin refuses it: `failRequestsGreaterThanOne` is
/// true by default (bottlerocket-core-kit `nvidia-k8s-device-plugin-conf.in`), and "The
/// container's pod will fail with an `UnexpectedAdmissionError`" (NVIDIA/k8s-device-plugin
/// README). Families hold multi-GPU sizes too (g5, g6, g6e up to 8).
pub(super) fn shared_sizes(pool: &Resource, known: &[(String, InstanceInfo)], d: &mut Vec<Diagnostic>) {
    let Some(strategy) = shared(pool) else { return };
    let mut multi: Vec<String> =
        known.iter().filter(|(_, i)| i.gpus > 1).map(|(t, i)| format!("{t} ({} GPUs)", i.gpus)).collect();
    let families = strings(lit(pool, "instance_families"));
    multi.extend(families.iter().map(|f| format!("the {f} family")));
    if multi.is_empty() {
        return;
    }
    d.push(
        Diagnostic::warning(
            format!(
                "`{}` shares GPUs ({strategy}) on multi-GPU sizes: {}. Karpenter picks such a size for a pod asking for more than one nvidia.com/gpu, and the pod then fails admission (UnexpectedAdmissionError)",
                pool.address,
                multi.join(", ")
            ),
            span(pool, if families.is_empty() { "instance_types" } else { "instance_families" }),
        )
        .help("list single-GPU sizes (g6.xlarge, g6.2xlarge…) in shared pools, and run multi-GPU pods in a pool without gpu_sharing"),
    );
}

/// Issue 18 review B1: a pool whose sharing multiplies the rendered `nvidia.com/gpu` limit,
/// with types of different vCPU:GPU ratios, and capacity that is not only reserved (a
/// reservation's size bounds a reserved-only pool). Until a node initializes, Karpenter
/// charges it with its type's physical GPUs (kubernetes-sigs/karpenter v1.14.1
/// `pkg/controllers/state/statenode.go` `Capacity()`, l.359-368) and subtracts each new
/// NodeClaim's physical capacity within a pass (`pkg/controllers/provisioning/scheduling/scheduler.go`
/// `subtractMax`), so one burst may start up to the multiplied limit in physical GPUs. With one
/// ratio the pool renders a `cpu` limit that bounds them (`render.rs` `limits`); here it cannot.
pub(super) fn burst_bound(pool: &Resource, d: &mut Vec<Diagnostic>) {
    let Some(limit) = lit(pool, "gpu_limit").and_then(|v| v.as_int()) else { return };
    let per_gpu = advertised_per_gpu(sharing_table(pool).as_ref(), None);
    if per_gpu <= 1 || capacity_types(pool).iter().all(|c| c == "reserved") {
        return;
    }
    let l = super::launchable(pool);
    let (types, families) = (l.types, l.families);
    if crate::resources::karpenter_pool::limit_resource(&types, &families) != "nvidia.com/gpu"
        || crate::resources::karpenter_pool::vcpus_per_gpu(&types, &families).is_some()
    {
        return;
    }
    let rendered = limit.saturating_mul(per_gpu);
    d.push(
        Diagnostic::warning(
            format!(
                "`{}`: gpu_limit = {limit} bounds physical GPUs only once nodes initialize: until then Karpenter charges each new node its physical GPUs against limits nvidia.com/gpu: {rendered}, so one burst may start up to {rendered} physical GPUs ({per_gpu}× gpu_limit); its instance types have different vCPU:GPU ratios, so no cpu limit can bound them",
                pool.address
            ),
            span(pool, "gpu_limit"),
        )
        .help("list instance types with one vCPU:GPU ratio (e.g. single-GPU sizes of one generation: instance_types = [\"g5.xlarge\", \"g6.xlarge\", \"g6e.xlarge\"]): gpustack then renders a cpu limit of gpu_limit × vCPUs per GPU, which Karpenter charges the same before and after nodes initialize"),
    );
}

/// The extended resources a `limits` key may cap accelerators by (what nodes report:
/// karpenter-provider-aws v1.14.1 `pkg/providers/instancetype/types.go` `nvidiaGPUs`,
/// `amdGPUs`, `awsNeuronDevices`, `habanaGaudis`).
pub const ACCELERATOR_RESOURCES: &[&str] =
    &["nvidia.com/gpu", "aws.amazon.com/neuron", "aws.amazon.com/neuroncore", "amd.com/gpu", "habana.ai/gaudi"];

/// Review r19 M2: a pool written with requirements alone whose derived set has no
/// accelerated type is a CPU pool only if gpustack can tell. The embedded catalog lacks
/// accelerated families newer than the file (p6e-gb200, p6e-gb300: `aws::catalog::coverage`),
/// so an empty set, an `In` value (type, family, category) the catalog does not know and that
/// is not of a CPU-only family, or a requirement that selects GPUs or accelerators
/// (instance-gpu-*, instance-accelerator-*) leaves "what does it launch" open: then a cap on
/// an accelerator resource (gpu_limit or a `limits` key) is required.
pub(super) fn derived_needs_cap(pool: &Resource, known: &[(String, InstanceInfo)], d: &mut Vec<Diagnostic>) {
    use crate::resources::karpenter_pool::requirements::{INSTANCE_FAMILY, INSTANCE_TYPE, parse};
    let l = super::launchable(pool);
    if !l.derived {
        return;
    }
    let embedded = crate::aws::catalog::embedded();
    if known.iter().any(|(t, i)| i.gpus > 0 || embedded.accelerated_family(t)) {
        return; // gpu_limit_binds asks for the cap
    }
    let capped = pool.attrs.contains_key("gpu_limit")
        || lit(pool, "limits")
            .and_then(|v| v.as_table().map(|t| t.keys().any(|k| ACCELERATOR_RESOURCES.contains(&k.as_str()))))
            .unwrap_or(false);
    if capped {
        return;
    }
    let category =
        |n: &str| n.split('.').next().unwrap_or(n).chars().take_while(char::is_ascii_alphabetic).collect::<String>();
    let mut why: Vec<String> = vec![];
    // The embedded catalog holds every accelerated type but only a sample of CPU ones: an empty
    // set is a CPU pool when every requirement was evaluated (Karpenter's own default pool,
    // `instance-cpu In [4, 8, 16, 32]`, admits none of the large CPU types it holds), and
    // ambiguous only when a key the catalog cannot evaluate might admit something else.
    if l.types.is_empty() && !l.unchecked.is_empty() {
        why.push(format!(
            "its requirements admit no type of the embedded catalog, and it cannot evaluate {}",
            l.unchecked.iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    for r in parse(&pool.attrs.keys().filter_map(|k| Some((k.clone(), lit(pool, k)?))).collect()) {
        let positive = !matches!(r.operator.as_str(), "NotIn" | "DoesNotExist");
        if positive && (r.key.contains("/instance-gpu-") || r.key.contains("/instance-accelerator-")) {
            why.push(format!("{} {} selects GPUs or accelerators", r.key, r.operator));
        }
        if r.operator != "In" {
            continue;
        }
        let unknown: Vec<&String> = r
            .values
            .iter()
            .filter(|v| match r.key.as_str() {
                INSTANCE_TYPE => embedded.get(v).is_none() && !embedded.cpu_only_family(v),
                INSTANCE_FAMILY => {
                    !embedded.all().any(|i| i.name.split('.').next() == Some(v.as_str()))
                        && !embedded.cpu_only_family(v)
                }
                "karpenter.k8s.aws/instance-category" => {
                    !embedded.all().any(|i| category(&i.name) == **v) && !embedded.cpu_only_family(&format!("{v}1"))
                }
                _ => false,
            })
            .collect();
        if !unknown.is_empty() {
            let names: Vec<&str> = unknown.iter().map(|s| s.as_str()).collect();
            why.push(format!("{} names {}, which the catalog does not know", r.key, names.join(", ")));
        }
    }
    if why.is_empty() {
        return;
    }
    d.push(
        Diagnostic::error(
            format!(
                "`{}`: gpustack cannot tell whether this pool launches GPUs or accelerators ({}), and nothing caps them",
                pool.address,
                why.join("; ")
            ),
            span(pool, "requirements"),
        )
        .help("list instance_types or instance_families, or cap it: gpu_limit = N (NVIDIA), or limits = { \"aws.amazon.com/neuron\" = N } for Neuron devices"),
    );
}

/// Review r19 M2: `gpu_limit` caps one resource ([`limit_resource`]), so a pool that may
/// launch NVIDIA GPUs and Neuron devices (or AMD GPUs) would leave the others uncapped.
pub(super) fn one_accelerator_maker(pool: &Resource, known: &[(String, InstanceInfo)], d: &mut Vec<Diagnostic>) {
    use crate::resources::karpenter_pool::gpu_maker;
    use crate::resources::karpenter_pool::requirements::neuron;
    if !pool.attrs.contains_key("gpu_limit") {
        return;
    }
    let l = super::launchable(pool);
    let names: Vec<&str> = known.iter().map(|(t, _)| t.as_str()).chain(l.families.iter().map(String::as_str)).collect();
    let mut makers = BTreeSet::new();
    for n in names {
        if neuron(n) {
            makers.insert("Neuron");
        } else if let Some(m) = gpu_maker(n) {
            makers.insert(m);
        }
    }
    if makers.len() > 1 {
        d.push(
            Diagnostic::error(
                format!(
                    "`{}` may launch {} types, but gpu_limit caps one resource (nvidia.com/gpu, aws.amazon.com/neuron or amd.com/gpu): the others would be uncapped",
                    pool.address,
                    makers.into_iter().collect::<Vec<_>>().join(" and ")
                ),
                span(pool, "gpu_limit"),
            )
            .help("split it into one pool per accelerator maker (e.g. add karpenter.k8s.aws/instance-family NotIn the other maker's families)"),
        );
    }
}

/// A pool written with requirements whose derived set holds types Karpenter counts as 0
/// GPUs (g6f, gr6f, p5.4xlarge: [`ZERO_GPU_TYPES`]): the listed-type rule refuses them, but
/// Karpenter's own GPU NodePools (instance-category g, gpu-name l4) admit them by design, so
/// this warns with the requirement that removes them rather than refusing the pool.
pub(super) fn derived_zero_gpu(pool: &Resource, known: &[(String, InstanceInfo)], d: &mut Vec<Diagnostic>) {
    if !super::launchable(pool).derived {
        return;
    }
    let zero: BTreeSet<&str> = known
        .iter()
        .map(|(t, _)| t.as_str())
        .filter(|t| ZERO_GPU_TYPES.contains(t) || ZERO_GPU_FAMILIES.contains(&family(t)))
        .map(|t| if ZERO_GPU_TYPES.contains(&t) { t } else { family(t) })
        .collect();
    if zero.is_empty() {
        return;
    }
    let list = zero.iter().map(|z| format!("\"{z}\"")).collect::<Vec<_>>().join(", ");
    let key = if zero.iter().all(|z| !z.contains('.')) {
        "karpenter.k8s.aws/instance-family"
    } else {
        "node.kubernetes.io/instance-type"
    };
    d.push(
        Diagnostic::warning(
            format!(
                "`{}`: its requirements admit {}, which Karpenter counts as 0 GPUs (EC2 reports their GPU Count as 0): it never launches them for pods that request nvidia.com/gpu, may launch them for pods that do not, and does not charge them to gpu_limit (aws/karpenter-provider-aws#8368)",
                pool.address,
                zero.iter().copied().collect::<Vec<_>>().join(", ")
            ),
            span(pool, "requirements"),
        )
        .help(format!("add {{ key = \"{key}\", operator = \"NotIn\", values = [{list}] }} to requirements")),
    );
}
