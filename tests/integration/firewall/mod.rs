//! The firewall plugin: `behaviour` (traffic through a DROP policy, ingress policies, the
//! reference layout, differential runs inline), `iptables_nft` (the iptables backend over
//! nf_tables netlink on an iptables-nft host: the same rules as through iptables-restore,
//! read and deleted by iptables and the reference, no process) and `processes` (firewall
//! rules that start no helper process, and the iptables fallback without nf_tables).
mod behaviour;
mod iptables_nft;
mod processes;
