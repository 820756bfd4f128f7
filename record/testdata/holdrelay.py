# A relay that holds what it is sent: one client; each frame is a command
# byte, a 4-byte big-endian length and the body. 'E' echoes the body at
# once, 'L' after HOLD seconds, 'D' drops it. It prints its port first.
import socket
import struct
import sys
import time

hold = float(sys.argv[1])
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(1)
print(srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rd = conn.makefile("rb")
while True:
    head = rd.read(5)
    if len(head) < 5:
        break
    cmd, n = head[:1], struct.unpack(">I", head[1:])[0]
    body = rd.read(n)
    if cmd == b"L":
        time.sleep(hold)
    if cmd in (b"E", b"L"):
        conn.sendall(body)
