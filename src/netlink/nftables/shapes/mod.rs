//! Rule shapes: each user's rules in its own words, translated into nf_tables objects.
//! One file per user; see the [module docs](super) for how to add one.
pub mod firewall;
pub mod masquerade;
pub mod portmap;
pub mod spoofcheck;
pub mod xtables;
