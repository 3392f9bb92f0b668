//! The reliability guarantees of docs/reliability.md, one file each: the cross-plugin DEL
//! matrix, crash consistency, concurrency, fuzzing, the checked-in corpus, security.
mod concurrency;
mod corpus;
mod crash;
pub mod del_matrix;
mod fuzz;
mod security;
