//! The EFA network interfaces an instance type gets: how many, on which network cards, and
//! which is ENA, EFA or EFA-only. The one place that answers it, from the catalog's
//! `NetworkInfo` (eksctl's `pkg/cfn/builder/network_interfaces.go` is the model); the GPU
//! rules and the launch template both ask [`InstanceInfo::efa_interfaces`].

use super::InstanceInfo;

/// What one network interface of an EFA launch template is (EC2's `InterfaceType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InterfaceKind {
    /// A plain ENA interface: the primary on a type whose card 0 does not support EFA.
    Ena,
    /// An EFA interface that also carries IP traffic.
    Efa,
    /// An EFA-only interface: no IP traffic, and never the primary.
    EfaOnly,
}

impl InterfaceKind {
    /// The `InterfaceType` value EC2 takes.
    pub fn as_str(self) -> &'static str {
        match self {
            InterfaceKind::Ena => "interface",
            InterfaceKind::Efa => "efa",
            InterfaceKind::EfaOnly => "efa-only",
        }
    }
}

/// One network interface: the network card, the device index on it, and its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetworkInterface {
    pub card: u32,
    pub device: u32,
    pub kind: InterfaceKind,
}

/// The network interfaces of an EFA launch template, the primary first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EfaLayout {
    pub interfaces: Vec<NetworkInterface>,
}

impl EfaLayout {
    /// How many interfaces carry EFA (all but an ENA primary).
    pub fn efa_count(&self) -> usize {
        self.interfaces.iter().filter(|i| i.kind != InterfaceKind::Ena).count()
    }

    /// The network cards that carry EFA, in order (what Karpenter's `networkInterfaces` are
    /// rendered from: it has its own interface kinds).
    pub fn efa_cards(&self) -> Vec<u32> {
        self.interfaces.iter().filter(|i| i.kind != InterfaceKind::Ena).map(|i| i.card).collect()
    }

    /// True when card 0 is ENA-only: an ENA primary plus efa-only on the EFA cards.
    pub fn ena_primary(&self) -> bool {
        self.interfaces.first().is_some_and(|i| i.kind == InterfaceKind::Ena)
    }
}

/// Why a type cannot have the EFA interfaces asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EfaRefusal {
    /// The type has no EFA.
    Unsupported,
    /// More were asked for than the type has (or a count below zero).
    TooMany { max: u32, asked: i64 },
}

impl InstanceInfo {
    /// The network interfaces an EFA launch template gives this type when `wanted` EFA
    /// interfaces are asked for (None: every one the type has): how many, on which network
    /// cards, and which is ENA, EFA or EFA-only. The one place that answers it; the rules and
    /// the launch template both ask here (eksctl's `network_interfaces.go` is the model).
    ///
    /// The EFA cards are those whose `NetworkInfo.NetworkCards[].InterfaceTypes` include EFA
    /// (EC2 UG `efa-acc-inst-types`: "If the network card index 0 supports EFA…", so card 0
    /// may not). When card 0 supports EFA, card 0 / device 0 is an `efa` interface that also
    /// carries IP traffic and every further EFA card gets an `efa-only` at device index 1. When
    /// card 0 is ENA-only (newer types), the primary is a plain ENA interface on card 0 and each
    /// EFA card gets an `efa-only` at device index 0: an `efa-only` interface cannot be the
    /// primary.
    pub fn efa_interfaces(&self, wanted: Option<i64>) -> Result<EfaLayout, EfaRefusal> {
        let max = self.max_efa_interfaces;
        if max == 0 {
            return Err(EfaRefusal::Unsupported);
        }
        let n = match wanted {
            None => max,
            Some(asked) => match u32::try_from(asked) {
                Ok(k) if k <= max => k.max(1),
                _ => return Err(EfaRefusal::TooMany { max, asked }),
            },
        };
        let cards: Vec<u32> = if self.efa_cards.is_empty() { (0..max).collect() } else { self.efa_cards.clone() };
        let cards = &cards[..(n as usize).min(cards.len())];
        let nic = |card: u32, device: u32, kind: InterfaceKind| NetworkInterface { card, device, kind };
        let interfaces = if cards.first().is_none_or(|c| *c == 0) {
            let rest = cards.iter().skip(1).map(|&c| nic(c, 1, InterfaceKind::EfaOnly));
            std::iter::once(nic(0, 0, InterfaceKind::Efa)).chain(rest).collect()
        } else {
            let efa = cards.iter().map(|&c| nic(c, 0, InterfaceKind::EfaOnly));
            std::iter::once(nic(0, 0, InterfaceKind::Ena)).chain(efa).collect()
        };
        Ok(EfaLayout { interfaces })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn efa_type(max: u32, cards: Vec<u32>) -> InstanceInfo {
        InstanceInfo {
            name: "p5.48xlarge".into(),
            vcpus: 192,
            gpus: 8,
            gpu_model: Some("H100".into()),
            gpu_manufacturer: Some("NVIDIA".into()),
            gpu_memory_mib: 81920,
            max_efa_interfaces: max,
            network_cards: 32,
            efa_cards: cards,
            architectures: vec!["x86_64".into()],
        }
    }

    fn triples(l: &EfaLayout) -> Vec<(u32, u32, &'static str)> {
        l.interfaces.iter().map(|n| (n.card, n.device, n.kind.as_str())).collect()
    }

    #[test]
    fn efa_on_card_zero_then_efa_only_at_device_one_on_the_rest() {
        let p5 = efa_type(32, (0..32).collect());
        let l = p5.efa_interfaces(None).unwrap();
        assert_eq!((l.interfaces.len(), l.efa_count(), l.ena_primary()), (32, 32, false));
        assert_eq!(triples(&l)[0], (0, 0, "efa"));
        assert!(triples(&l)[1..].iter().enumerate().all(|(k, t)| *t == (k as u32 + 1, 1, "efa-only")));
        // Without per-card interface types, cards 0..max are assumed.
        assert_eq!(
            efa_type(4, vec![]).efa_interfaces(None).unwrap(),
            efa_type(4, vec![0, 1, 2, 3]).efa_interfaces(None).unwrap()
        );
    }

    #[test]
    fn an_ena_only_card_zero_keeps_an_ena_primary_and_efa_only_on_the_efa_cards() {
        let b300 = efa_type(16, (1..=16).collect());
        let l = b300.efa_interfaces(None).unwrap();
        assert_eq!((l.interfaces.len(), l.efa_count(), l.ena_primary()), (17, 16, true));
        assert_eq!(triples(&l)[0], (0, 0, "interface"));
        assert!(triples(&l)[1..].iter().enumerate().all(|(k, t)| *t == (k as u32 + 1, 0, "efa-only")));
        assert_eq!(
            triples(&b300.efa_interfaces(Some(2)).unwrap()),
            vec![(0, 0, "interface"), (1, 0, "efa-only"), (2, 0, "efa-only")]
        );
    }

    #[test]
    fn efa_counts_are_checked_against_the_type() {
        let p5 = efa_type(32, (0..32).collect());
        assert_eq!(p5.efa_interfaces(Some(1)).unwrap().interfaces.len(), 1);
        assert_eq!(p5.efa_interfaces(Some(0)).unwrap().interfaces.len(), 1, "at least the primary");
        assert_eq!(p5.efa_interfaces(Some(33)), Err(EfaRefusal::TooMany { max: 32, asked: 33 }));
        assert_eq!(p5.efa_interfaces(Some(-1)), Err(EfaRefusal::TooMany { max: 32, asked: -1 }));
        assert_eq!(efa_type(0, vec![]).efa_interfaces(None), Err(EfaRefusal::Unsupported));
    }
}
