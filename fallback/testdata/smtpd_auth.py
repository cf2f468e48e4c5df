"""A real aiosmtpd server that requires AUTH, for the fallback package's tests.

aiosmtpd's command line cannot enable authentication, so this mirrors `python3 -m aiosmtpd`
with an authenticator that accepts one fixed user and password. Messages go to a Maildir like
aiosmtpd.handlers.Mailbox.

usage: smtpd_auth.py --listen HOST:PORT --user U --password P [--tlscert C --tlskey K]
                     [--auth-in-clear] [--exclude-mech MECH]... MAILDIR
"""

import argparse
import asyncio
import signal
import ssl
from functools import partial

from aiosmtpd.handlers import Mailbox
from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--listen", required=True)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    p.add_argument("--tlscert")
    p.add_argument("--tlskey")
    p.add_argument("--auth-in-clear", action="store_true",
                   help="offer AUTH before STARTTLS (aiosmtpd's auth_require_tls=False)")
    p.add_argument("--exclude-mech", action="append", default=[])
    p.add_argument("maildir")
    args = p.parse_args()
    host, _, port = args.listen.rpartition(":")

    user, password = args.user.encode(), args.password.encode()

    def authenticator(server, session, envelope, mechanism, auth_data):
        ok = isinstance(auth_data, LoginPassword) and \
            auth_data.login == user and auth_data.password == password
        # handled=False: let aiosmtpd answer a failure with 535, as a real server does.
        return AuthResult(success=ok, handled=False)

    tls_context = None
    if args.tlscert:
        tls_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls_context.check_hostname = False
        tls_context.load_cert_chain(args.tlscert, args.tlskey)

    factory = partial(
        SMTP,
        Mailbox(args.maildir),
        tls_context=tls_context,
        require_starttls=tls_context is not None,
        authenticator=authenticator,
        auth_required=True,
        auth_require_tls=not args.auth_in_clear,
        auth_exclude_mechanism=args.exclude_mech,
    )
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    server = loop.run_until_complete(loop.create_server(factory, host=host, port=int(port)))
    loop.add_signal_handler(signal.SIGTERM, loop.stop)
    loop.add_signal_handler(signal.SIGINT, loop.stop)
    loop.run_forever()
    server.close()


if __name__ == "__main__":
    main()
