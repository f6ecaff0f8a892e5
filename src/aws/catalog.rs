//! The instance catalog: what `DescribeInstanceTypes` says about the instance types a
//! stack uses (vCPUs, GPUs, EFA), read once per run and shared by the kinds and the
//! GPU rules.

use std::collections::{BTreeSet, HashMap};

use aws_sdk_ec2::types::{InstanceType, InstanceTypeInfo, NetworkCardInterfaceType};
use tokio::sync::Mutex;

use super::{AwsError, Ctx, Service, err};

/// Types whose GPU count `DescribeInstanceTypes` reports as 0 in both `LogicalGpuCount` and
/// `Count` (karpenter-provider-aws#8368): their real count.
const GPU_OVERRIDES: &[(&str, u32)] = &[
    ("p5.4xlarge", 1),
    ("g6f.large", 1),
    ("g6f.xlarge", 1),
    ("g6f.2xlarge", 1),
    ("g6f.4xlarge", 1),
    ("gr6f.4xlarge", 1),
];

/// GPUs that can be partitioned with MIG (NVIDIA's list; Bottlerocket 1.34+ exposes it).
const MIG_GPUS: &[&str] = &["A100", "A30", "H100", "H200", "H20", "B200", "B300", "GB200", "GB300"];

/// A GPU model as Bottlerocket's MIG manager names it, with the values its `mig.profile`
/// entry accepts: a partition count or the matching profile, always a quoted string.
#[derive(Debug)]
pub struct MigModel {
    /// `GpuInfo.Gpus[].Name` as DescribeInstanceTypes reports it.
    pub gpu: &'static str,
    /// `MemoryInfo.SizeInMiB` of one GPU (p4de's A100 80 GB reports 76294, not 81920).
    pub memory_mib: std::ops::Range<u64>,
    /// The key in `settings.kubelet-device-plugins.nvidia.mig.profile`.
    pub key: &'static str,
    /// (partition count, profile) pairs.
    pub layouts: &'static [(&'static str, &'static str)],
}

impl MigModel {
    /// True when `v` is a count or a profile this GPU takes.
    pub fn accepts(&self, v: &str) -> bool {
        self.layouts.iter().any(|(n, p)| *n == v || *p == v)
    }

    /// "7 (1g.10gb), 4 (1g.20gb), …" for help lines.
    pub fn choices(&self) -> String {
        self.layouts.iter().map(|(n, p)| format!("\"{n}\" ({p})")).collect::<Vec<_>>().join(", ")
    }
}

/// The GPUs Bottlerocket's nvidia-migmanager partitions, keyed as it keys them. Source:
/// bottlerocket kernel kit, `sources/nvidia-migmanager/src/mig_profile.rs` (it maps PCI
/// device ids to these keys; the memory ranges here tell the same GPUs apart from
/// DescribeInstanceTypes data). An unknown value would silently fall back to the whole GPU,
/// so gpustack checks values against this table.
pub const MIG_MODELS: &[MigModel] = &[
    MigModel {
        gpu: "A100",
        memory_mib: 0..60_000,
        key: "a100.40gb",
        layouts: &[("7", "1g.5gb"), ("4", "1g.10gb"), ("3", "2g.10gb"), ("2", "3g.20gb"), ("1", "7g.40gb")],
    },
    MigModel {
        gpu: "A100",
        memory_mib: 60_000..100_000,
        key: "a100.80gb",
        layouts: &[("7", "1g.10gb"), ("4", "1g.20gb"), ("3", "2g.20gb"), ("2", "3g.40gb"), ("1", "7g.80gb")],
    },
    MigModel {
        gpu: "H100",
        memory_mib: 0..100_000,
        key: "h100.80gb",
        layouts: &[("7", "1g.10gb"), ("4", "1g.20gb"), ("3", "2g.20gb"), ("2", "3g.40gb"), ("1", "7g.80gb")],
    },
    MigModel {
        gpu: "H200",
        memory_mib: 0..200_000,
        key: "h200.141gb",
        layouts: &[("7", "1g.18gb"), ("4", "1g.35gb"), ("3", "2g.35gb"), ("2", "3g.71gb"), ("1", "7g.141gb")],
    },
    MigModel {
        gpu: "B200",
        memory_mib: 0..250_000,
        key: "b200.180gb",
        layouts: &[("7", "1g.23gb"), ("4", "1g.45gb"), ("3", "2g.45gb"), ("2", "3g.90gb"), ("1", "7g.180gb")],
    },
];

#[derive(Clone, Debug, PartialEq)]
pub struct InstanceInfo {
    pub name: String,
    pub vcpus: u32,
    pub gpus: u32,
    /// "H100"; None for types without GPUs.
    pub gpu_model: Option<String>,
    pub gpu_manufacturer: Option<String>,
    /// Memory of one GPU.
    pub gpu_memory_mib: u64,
    pub max_efa_interfaces: u32,
    pub network_cards: u32,
    /// Network cards whose `InterfaceTypes` include `efa` or `efa-only`, in order. Empty when
    /// DescribeInstanceTypes gave no per-card interface types (then cards `0..max_efa_interfaces`
    /// are assumed, the layout every EFA type had before ENA-only card 0 appeared).
    pub efa_cards: Vec<u32>,
    /// "x86_64", "arm64".
    pub architectures: Vec<String>,
}

impl InstanceInfo {
    pub fn from_sdk(t: &InstanceTypeInfo) -> InstanceInfo {
        let name = t.instance_type().map(|x| x.as_str().to_string()).unwrap_or_default();
        let gpu = t.gpu_info().and_then(|g| g.gpus().first());
        let reported = t
            .gpu_info()
            .map(|g| {
                g.gpus()
                    .iter()
                    .map(|d| d.logical_gpu_count().filter(|n| *n > 0).or(d.count()).unwrap_or(0).max(0) as u32)
                    .sum::<u32>()
            })
            .unwrap_or(0);
        let gpus =
            if reported > 0 { reported } else { GPU_OVERRIDES.iter().find(|(n, _)| *n == name).map_or(0, |(_, c)| *c) };
        let net = t.network_info();
        InstanceInfo {
            vcpus: t.v_cpu_info().and_then(|v| v.default_v_cpus()).unwrap_or(0).max(0) as u32,
            gpus,
            gpu_model: gpu.and_then(|g| g.name()).map(str::to_string),
            gpu_manufacturer: gpu.and_then(|g| g.manufacturer()).map(str::to_string),
            gpu_memory_mib: gpu.and_then(|g| g.memory_info()).and_then(|m| m.size_in_mib()).unwrap_or(0).max(0) as u64,
            max_efa_interfaces: net
                .filter(|n| n.efa_supported() == Some(true) || n.efa_info().is_some())
                .and_then(|n| n.efa_info())
                .and_then(|e| e.maximum_efa_interfaces())
                .unwrap_or(0)
                .max(0) as u32,
            network_cards: net.and_then(|n| n.maximum_network_cards()).unwrap_or(1).max(1) as u32,
            efa_cards: net
                .map(|n| {
                    let mut cards: Vec<u32> = n
                        .network_cards()
                        .iter()
                        .filter(|c| {
                            c.interface_types()
                                .iter()
                                .any(|k| matches!(k, NetworkCardInterfaceType::Efa | NetworkCardInterfaceType::EfaOnly))
                        })
                        .filter_map(|c| c.network_card_index().map(|i| i.max(0) as u32))
                        .collect();
                    cards.sort_unstable();
                    cards.dedup();
                    cards
                })
                .unwrap_or_default(),
            architectures: t
                .processor_info()
                .map(|p| p.supported_architectures().iter().map(|a| a.as_str().to_string()).collect())
                .unwrap_or_default(),
            name,
        }
    }

    pub fn is_nvidia(&self) -> bool {
        self.gpus > 0 && self.gpu_manufacturer.as_deref().is_some_and(|m| m.eq_ignore_ascii_case("nvidia"))
    }

    pub fn mig_capable(&self) -> bool {
        self.gpu_model.as_deref().is_some_and(|m| MIG_GPUS.iter().any(|g| g.eq_ignore_ascii_case(m)))
    }

    /// The key Bottlerocket's `mig.profile` map uses for this type's GPU ("h100.80gb"), from
    /// [`MIG_MODELS`]; None for a GPU Bottlerocket's MIG manager does not know.
    pub fn mig_model(&self) -> Option<&'static MigModel> {
        let name = self.gpu_model.as_deref()?;
        MIG_MODELS.iter().find(|m| m.gpu.eq_ignore_ascii_case(name) && m.memory_mib.contains(&self.gpu_memory_mib))
    }

    /// The network cards that get an EFA interface when `wanted` are asked for (None: every
    /// one the type has), from `NetworkInfo.NetworkCards[].InterfaceTypes` (EC2 UG
    /// `efa-acc-inst-types`: "If the network card index 0 supports EFA…", so card 0 may not).
    /// The one place that answers "how many EFA interfaces, on which cards".
    pub fn efa_layout(&self, wanted: Option<u32>) -> Vec<u32> {
        let cards: Vec<u32> =
            if self.efa_cards.is_empty() { (0..self.max_efa_interfaces).collect() } else { self.efa_cards.clone() };
        let n = wanted.unwrap_or(self.max_efa_interfaces).min(self.max_efa_interfaces) as usize;
        cards.into_iter().take(n).collect()
    }

    /// "8× H100 80 GiB, 192 vCPUs, 32 EFA": for plans and errors.
    pub fn summary(&self) -> String {
        let mut parts = vec![];
        if self.gpus > 0 {
            parts.push(format!(
                "{}× {} {} GiB",
                self.gpus,
                self.gpu_model.as_deref().unwrap_or("GPU"),
                self.gpu_memory_mib / 1024
            ));
        }
        parts.push(format!("{} vCPUs", self.vcpus));
        if self.max_efa_interfaces > 0 {
            parts.push(format!("{} EFA", self.max_efa_interfaces));
        }
        parts.join(", ")
    }

    /// "arm64" when the type runs only arm64, else "x86_64".
    pub fn arch(&self) -> &'static str {
        if !self.architectures.is_empty() && self.architectures.iter().all(|a| a == "arm64") {
            "arm64"
        } else {
            "x86_64"
        }
    }
}

/// Instance types looked up so far (None: EC2 does not know the type).
#[derive(Default)]
pub struct Catalog {
    known: Mutex<HashMap<String, Option<InstanceInfo>>>,
}

impl Catalog {
    /// Looks up `types` (one call per 100 not yet cached); unknown types map to None.
    pub async fn lookup(
        &self,
        ctx: &Ctx,
        types: impl IntoIterator<Item = String>,
    ) -> Result<HashMap<String, Option<InstanceInfo>>, AwsError> {
        let wanted: BTreeSet<String> = types.into_iter().collect();
        let mut known = self.known.lock().await;
        let missing: Vec<String> = wanted.iter().filter(|t| !known.contains_key(*t)).cloned().collect();
        for chunk in missing.chunks(100) {
            match describe(ctx, chunk).await {
                Ok(infos) => {
                    for t in chunk {
                        known.insert(t.clone(), infos.iter().find(|i| &i.name == t).cloned());
                    }
                }
                // One unknown name fails the whole call: ask for each alone to tell which.
                Err(e) if e.code.as_deref() == Some("InvalidInstanceType") => {
                    for t in chunk {
                        let one = match describe(ctx, std::slice::from_ref(t)).await {
                            Ok(mut v) => v.pop(),
                            Err(e) if e.code.as_deref() == Some("InvalidInstanceType") => None,
                            Err(e) => return Err(e),
                        };
                        known.insert(t.clone(), one);
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(wanted.into_iter().map(|t| (t.clone(), known.get(&t).cloned().flatten())).collect())
    }

    /// One type (cached); None when EC2 does not know it.
    pub async fn get(&self, ctx: &Ctx, name: &str) -> Result<Option<InstanceInfo>, AwsError> {
        Ok(self.lookup(ctx, [name.to_string()]).await?.remove(name).flatten())
    }
}

async fn describe(ctx: &Ctx, types: &[String]) -> Result<Vec<InstanceInfo>, AwsError> {
    let _p = ctx.permit(Service::Ec2).await;
    let out = ctx
        .ec2
        .describe_instance_types()
        .set_instance_types(Some(types.iter().map(|t| InstanceType::from(t.as_str())).collect()))
        .send()
        .await
        .map_err(err("DescribeInstanceTypes"))?;
    Ok(out.instance_types().iter().map(InstanceInfo::from_sdk).collect())
}

#[cfg(test)]
mod tests {
    use aws_sdk_ec2::types::{GpuDeviceInfo, GpuDeviceMemoryInfo, GpuInfo, VCpuInfo};

    use super::*;

    fn gpu_type(name: &str, count: Option<i32>, logical: Option<i32>) -> InstanceTypeInfo {
        let mut dev = GpuDeviceInfo::builder()
            .name("L4")
            .manufacturer("NVIDIA")
            .memory_info(GpuDeviceMemoryInfo::builder().size_in_mib(22888).build());
        dev = dev.set_count(count).set_logical_gpu_count(logical);
        InstanceTypeInfo::builder()
            .instance_type(InstanceType::from(name))
            .v_cpu_info(VCpuInfo::builder().default_v_cpus(8).build())
            .gpu_info(GpuInfo::builder().gpus(dev.build()).build())
            .build()
    }

    #[test]
    fn gpu_count_prefers_logical_then_count_then_the_override_table() {
        assert_eq!(InstanceInfo::from_sdk(&gpu_type("g6.12xlarge", Some(4), Some(4))).gpus, 4);
        assert_eq!(InstanceInfo::from_sdk(&gpu_type("g6f.large", Some(0), Some(1))).gpus, 1);
        assert_eq!(InstanceInfo::from_sdk(&gpu_type("g6.xlarge", Some(1), None)).gpus, 1);
        assert_eq!(InstanceInfo::from_sdk(&gpu_type("p5.4xlarge", Some(0), Some(0))).gpus, 1);
        assert_eq!(InstanceInfo::from_sdk(&gpu_type("g6f.xlarge", None, None)).gpus, 1);
        assert_eq!(InstanceInfo::from_sdk(&gpu_type("x9.large", Some(0), Some(0))).gpus, 0);
    }

    #[test]
    fn mig_keys_come_from_the_table_not_from_memory_arithmetic() {
        let mut i = InstanceInfo::from_sdk(&gpu_type("p5.48xlarge", Some(8), Some(8)));
        let key = |i: &InstanceInfo| i.mig_model().map(|m| m.key);
        i.gpu_model = Some("H100".into());
        i.gpu_memory_mib = 81920;
        assert_eq!(key(&i), Some("h100.80gb"));
        assert!(i.mig_capable());
        // p4de's A100 80 GB reports 76294 MiB: 76294 / 1024 would say "a100.74gb".
        i.gpu_model = Some("A100".into());
        i.gpu_memory_mib = 76294;
        assert_eq!(key(&i), Some("a100.80gb"));
        i.gpu_memory_mib = 40960;
        assert_eq!(key(&i), Some("a100.40gb"));
        i.gpu_model = Some("H200".into());
        i.gpu_memory_mib = 143771;
        assert_eq!(key(&i), Some("h200.141gb"));
        let h200 = i.mig_model().unwrap();
        assert!(h200.accepts("4") && h200.accepts("1g.18gb") && !h200.accepts("1g.10gb") && !h200.accepts("5"));
        i.gpu_model = Some("L4".into());
        assert!(!i.mig_capable());
        assert_eq!(key(&i), None);
    }
}
