//! The firewall plugin: `behaviour` (traffic through a DROP policy, ingress policies, the
//! reference layout, differential runs inline) and `processes` (firewall rules that start no
//! helper process, and the iptables fallback without nf_tables).
mod behaviour;
mod processes;
