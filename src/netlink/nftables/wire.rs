//! nf_tables numbers (linux/netfilter/nf_tables.h, libnftnl's udata.h), as plain integers.

// messages (NFT_MSG_*)
pub(crate) const NFT_MSG_NEWTABLE: u8 = 0;
pub(crate) const NFT_MSG_GETTABLE: u8 = 1;
pub(crate) const NFT_MSG_DELTABLE: u8 = 2;
pub(crate) const NFT_MSG_NEWCHAIN: u8 = 3;
pub(crate) const NFT_MSG_GETCHAIN: u8 = 4;
pub(crate) const NFT_MSG_DELCHAIN: u8 = 5;
pub(crate) const NFT_MSG_NEWRULE: u8 = 6;
pub(crate) const NFT_MSG_GETRULE: u8 = 7;
pub(crate) const NFT_MSG_DELRULE: u8 = 8;
pub(crate) const NFT_MSG_NEWSET: u8 = 9;
pub(crate) const NFT_MSG_GETSET: u8 = 10;
pub(crate) const NFT_MSG_NEWSETELEM: u8 = 12;
pub(crate) const NFT_MSG_GETSETELEM: u8 = 13;
pub(crate) const NFT_MSG_DELSETELEM: u8 = 14;
pub(crate) const NFT_MSG_GETGEN: u8 = 16;
/// NFTA_GEN_ID of NFT_MSG_NEWGEN: the ruleset's generation.
pub(crate) const NFTA_GEN_ID: u16 = 1;

// NFTA_TABLE_*
pub(crate) const NFTA_TABLE_NAME: u16 = 1;
pub(crate) const NFTA_TABLE_FLAGS: u16 = 2;
pub(crate) const NFTA_TABLE_USERDATA: u16 = 6;

// NFTA_CHAIN_*
pub(crate) const NFTA_CHAIN_TABLE: u16 = 1;
pub(crate) const NFTA_CHAIN_HANDLE: u16 = 2;
pub(crate) const NFTA_CHAIN_NAME: u16 = 3;
pub(crate) const NFTA_CHAIN_HOOK: u16 = 4;
pub(crate) const NFTA_CHAIN_POLICY: u16 = 5;
pub(crate) const NFTA_CHAIN_TYPE: u16 = 7;
pub(crate) const NFTA_CHAIN_USERDATA: u16 = 12;
pub(crate) const NFTA_HOOK_HOOKNUM: u16 = 1;
pub(crate) const NFTA_HOOK_PRIORITY: u16 = 2;

// NFTA_RULE_*
pub(crate) const NFTA_RULE_TABLE: u16 = 1;
pub(crate) const NFTA_RULE_CHAIN: u16 = 2;
pub(crate) const NFTA_RULE_HANDLE: u16 = 3;
pub(crate) const NFTA_RULE_EXPRESSIONS: u16 = 4;
pub(crate) const NFTA_RULE_POSITION: u16 = 6;
pub(crate) const NFTA_RULE_USERDATA: u16 = 7;
pub(crate) const NFTA_LIST_ELEM: u16 = 1;

// NFTA_SET_* and NFTA_SET_ELEM_*
pub(crate) const NFTA_SET_TABLE: u16 = 1;
pub(crate) const NFTA_SET_NAME: u16 = 2;
pub(crate) const NFTA_SET_FLAGS: u16 = 3;
pub(crate) const NFTA_SET_KEY_TYPE: u16 = 4;
pub(crate) const NFTA_SET_KEY_LEN: u16 = 5;
pub(crate) const NFTA_SET_DATA_TYPE: u16 = 6;
pub(crate) const NFTA_SET_DATA_LEN: u16 = 7;
pub(crate) const NFTA_SET_ID: u16 = 10;
/// NFTA_SET_FLAGS: the set maps each key to data.
pub(crate) const NFT_SET_MAP: u32 = 0x8;
pub(crate) const NFTA_SET_USERDATA: u16 = 13;
pub(crate) const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
pub(crate) const NFTA_SET_ELEM_LIST_SET: u16 = 2;
pub(crate) const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
pub(crate) const NFTA_SET_ELEM_KEY: u16 = 1;
pub(crate) const NFTA_SET_ELEM_DATA: u16 = 2;
/// nft's datatype numbers (the set's key type, which `nft list` prints by).
pub(crate) const NFT_TYPE_IP6ADDR: u32 = 8;
pub(crate) const NFTA_EXPR_NAME: u16 = 1;
pub(crate) const NFTA_EXPR_DATA: u16 = 2;

// data and verdicts
pub(crate) const NFTA_DATA_VALUE: u16 = 1;
pub(crate) const NFTA_DATA_VERDICT: u16 = 2;
pub(crate) const NFTA_VERDICT_CODE: u16 = 1;
pub(crate) const NFTA_VERDICT_CHAIN: u16 = 2;
pub(crate) const NF_DROP: i32 = 0;
pub(crate) const NF_ACCEPT: i32 = 1;
pub(crate) const NFT_JUMP: i32 = -3;
pub(crate) const NFT_GOTO: i32 = -4;
pub(crate) const NFT_RETURN: i32 = -5;

// registers: 0 holds the verdict, 1..4 are the 16-byte data registers
pub(crate) const NFT_REG_VERDICT: u32 = 0;

// expression attributes
pub(crate) const NFTA_META_DREG: u16 = 1;
pub(crate) const NFTA_META_KEY: u16 = 2;
pub(crate) const NFTA_META_SREG: u16 = 3;
pub(crate) const NFTA_PAYLOAD_DREG: u16 = 1;
pub(crate) const NFTA_PAYLOAD_BASE: u16 = 2;
pub(crate) const NFTA_PAYLOAD_OFFSET: u16 = 3;
pub(crate) const NFTA_PAYLOAD_LEN: u16 = 4;
pub(crate) const NFTA_CMP_SREG: u16 = 1;
pub(crate) const NFTA_CMP_OP: u16 = 2;
pub(crate) const NFTA_CMP_DATA: u16 = 3;
pub(crate) const NFTA_BITWISE_SREG: u16 = 1;
pub(crate) const NFTA_BITWISE_DREG: u16 = 2;
pub(crate) const NFTA_BITWISE_LEN: u16 = 3;
pub(crate) const NFTA_BITWISE_MASK: u16 = 4;
pub(crate) const NFTA_BITWISE_XOR: u16 = 5;
pub(crate) const NFTA_IMMEDIATE_DREG: u16 = 1;
pub(crate) const NFTA_IMMEDIATE_DATA: u16 = 2;
pub(crate) const NFTA_NAT_TYPE: u16 = 1;
pub(crate) const NFTA_NAT_FAMILY: u16 = 2;
pub(crate) const NFTA_NAT_REG_ADDR_MIN: u16 = 3;
pub(crate) const NFTA_NAT_REG_PROTO_MIN: u16 = 5;
pub(crate) const NFTA_NAT_FLAGS: u16 = 7;
pub(crate) const NFTA_CT_DREG: u16 = 1;
pub(crate) const NFTA_CT_KEY: u16 = 2;
pub(crate) const NFTA_FIB_DREG: u16 = 1;
pub(crate) const NFTA_FIB_RESULT: u16 = 2;
pub(crate) const NFTA_FIB_FLAGS: u16 = 3;
pub(crate) const NFTA_COUNTER_BYTES: u16 = 1;
pub(crate) const NFTA_COUNTER_PACKETS: u16 = 2;

/// NF_NAT_RANGE_PROTO_SPECIFIED: the NAT rule also maps the port.
pub(crate) const NF_NAT_RANGE_PROTO_SPECIFIED: u32 = 2;

// libnftnl userdata TLVs (u8 type, u8 length, value): the comment is type 0 for tables,
// chains and rules alike, stored with its NUL as nft does.
pub(crate) const NFTNL_UDATA_COMMENT: u8 = 0;
/// A set's userdata TLVs: the key's byte order (nft's BYTEORDER_BIG_ENDIAN is 2, stored as
/// a host-order u32), and the comment.
pub(crate) const NFTNL_UDATA_SET_KEYBYTEORDER: u8 = 0;
pub(crate) const NFTNL_UDATA_SET_DATABYTEORDER: u8 = 1;
pub(crate) const NFTNL_UDATA_SET_COMMENT: u8 = 7;
pub(crate) const NFT_BYTEORDER_BIG_ENDIAN: u32 = 2;
/// NFT_USERDATA_MAXLEN bounds the whole userdata; nft caps comments at 128 bytes.
pub(crate) const NFT_COMMENT_MAX: usize = 128;

// nft_compat (xtables extensions run inside nf_tables, as iptables-nft uses them)
pub(crate) const NFTA_MATCH_NAME: u16 = 1;
pub(crate) const NFTA_MATCH_REV: u16 = 2;
pub(crate) const NFTA_MATCH_INFO: u16 = 3;
pub(crate) const NFTA_TARGET_NAME: u16 = 1;
pub(crate) const NFTA_TARGET_REV: u16 = 2;
pub(crate) const NFTA_TARGET_INFO: u16 = 3;
