// The Bun loader's forwarder, imported only when the runtime hands the worker its listener as
// descriptor 3 (socket activation), so that a start on a port does not compile it.

// forward accepts connections on descriptor fd and passes each on to port on the loopback,
// both ways, with Bun's own sockets: node:net, which did it before, takes Bun tens of
// milliseconds to load, at every start. What a side cannot take yet waits for its drain, and
// the other side is paused meanwhile, so neither direction buffers more than a chunk.
export function forward(fd, port) {
  // A socket's data: its peer (null until the upstream connection opens), what it has not
  // taken yet, whether it ends once that is written, and whether it has closed.
  const state = (peer) => ({ peer, queue: [], ending: false, closed: false });
  const pipe = {
    data(sock, chunk) {
      send(sock.data.peer, chunk, sock);
    },
    drain(sock) {
      const st = sock.data;
      while (st.queue.length) {
        const chunk = st.queue[0];
        const n = Math.max(sock.write(chunk), 0);
        if (n < chunk.length) {
          st.queue[0] = chunk.subarray(n);
          return;
        }
        st.queue.shift();
      }
      if (st.ending) sock.end();
      else st.peer?.resume();
    },
    end(sock) {
      end(sock.data.peer);
    },
    close(sock) {
      sock.data.closed = true;
      end(sock.data.peer);
    },
    error(sock) {
      sock.data.peer?.end();
    },
  };
  // send writes chunk from one socket to the other (its peer), keeping what it cannot take.
  function send(to, chunk, from) {
    if (to === null) {
      from.data.queue.push(chunk); // the upstream connection is not open yet
      from.pause();
      return;
    }
    const st = to.data;
    if (st.queue.length === 0) {
      const n = Math.max(to.write(chunk), 0);
      if (n === chunk.length) return;
      chunk = chunk.subarray(n);
    }
    st.queue.push(chunk);
    from.pause();
  }
  function end(sock) {
    if (!sock) return;
    if (sock.data.queue.length) sock.data.ending = true;
    else sock.end();
  }
  Bun.listen({
    fd,
    socket: {
      ...pipe,
      open(conn) {
        conn.data = state(null);
        connect(conn, 1);
      },
    },
  });
  // connect opens conn's upstream connection to Bun.serve; one that fails is tried again
  // retries times, then conn closes, the reason on standard error (the worker's logs): the
  // runtime answers 502 for a connection closed without an answer.
  function connect(conn, retries) {
    Bun.connect({
      hostname: "127.0.0.1",
      port,
      socket: {
        ...pipe,
        open(upstream) {
          upstream.data = state(conn);
          if (conn.data.closed) return upstream.end(); // the client left meanwhile
          // What the client sent before the upstream opened: its queue, as the upstream's.
          const early = conn.data.queue;
          conn.data = { ...conn.data, peer: upstream, queue: [] };
          for (const chunk of early) send(upstream, chunk, conn);
          if (upstream.data.queue.length === 0) conn.resume();
        },
      },
    }).catch((err) => {
      if (conn.data.closed) return;
      if (retries > 0) return connect(conn, retries - 1);
      console.error(`the loader could not pass a connection on to Bun.serve on 127.0.0.1:${port}: ${err}`);
      conn.end();
    });
  }
}
