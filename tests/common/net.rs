//! Client/server tests on loopback: a free port, and whether a server listens.

/// A free TCP port on 127.0.0.1 (bound, read, released).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("a bound address").port()
}

/// True once something listens on TCP `port` (any address, v4 or v6), read
/// from /proc/net/tcp{,6} so that the test never connects to the server
/// itself (a pingpong server takes the first connection as its client).
pub fn listening(port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|text| {
            text.lines().skip(1).any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.len() > 3 && w[1].ends_with(&want) && w[3] == "0A"
            })
        })
    })
}
