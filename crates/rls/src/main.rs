//! `limitcore-rls`: Envoy's rate-limit service on limitcore. `limitcore-rls --help` lists
//! the flags; each has an environment variable (`LIMITCORE_RLS_*`).

use clap::Parser;
use limitcore_rls::{start, ServerConfig, UnixClock};

fn main() {
    let config = ServerConfig::parse();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(workers) = config.workers {
        builder.worker_threads(workers.get());
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("limitcore-rls: cannot start the runtime: {e}");
            std::process::exit(1);
        }
    };
    let code = runtime.block_on(async {
        let metrics = match metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()
        {
            Ok(h) => Some(h),
            Err(e) => {
                eprintln!("limitcore-rls: no /metrics: {e}");
                None
            }
        };
        let running = match start(&config, UnixClock::shared(), metrics).await {
            Ok(r) => r,
            Err(e) => {
                eprintln!("limitcore-rls: {e}");
                return 1;
            }
        };
        let source = running.config.report();
        eprintln!(
            "limitcore-rls: gRPC on {} ({}), HTTP on {}, configuration from {} {}, backend {:?}, {} runtime workers",
            running.grpc_addr,
            running.grpc_security,
            running.http_addr,
            source.source,
            source.location,
            config.backend,
            tokio::runtime::Handle::current().metrics().num_workers()
        );
        shutdown_signal().await;
        eprintln!("limitcore-rls: shutting down");
        running.stop().await;
        0
    });
    std::process::exit(code);
}

/// Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
