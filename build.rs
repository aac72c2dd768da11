// Builds our BPF programs (bpf/main.bpf.c, bpf/oracle.bpf.c), their Rust skeletons, and
// bindgen's view of their headers, with scx_cargo's BpfBuilder (which bundles
// vmlinux.h and the scx headers and drives libbpf-cargo).
fn main() {
    // The scheduler (bpf/main.bpf.c), and the oracle (bpf/oracle.bpf.c): a separate
    // tracing program with its own contract, loaded by `scx_wakelab oracle record`.
    let built = scx_cargo::BpfBuilder::new()
        .and_then(|mut b| {
            b.enable_intf("bpf/intf.h", "bpf_intf.rs")
                .enable_skel("bpf/main.bpf.c", "bpf");
            b.build()
        })
        .and_then(|_| scx_cargo::BpfBuilder::new())
        .and_then(|mut b| {
            b.enable_intf("bpf/oracle.h", "oracle_intf.rs")
                .enable_skel("bpf/oracle.bpf.c", "oracle");
            b.build()
        });
    if let Err(e) = built {
        // One readable line instead of a panic backtrace from the build script.
        eprintln!("error: building the BPF component failed: {e:#}");
        eprintln!(
            "hint: it needs clang >= 16 (BPF_CLANG=clang-19 on Debian 12; run tools/install-deps)"
        );
        std::process::exit(1);
    }
}
