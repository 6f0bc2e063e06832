# Runs rdma-core's pyverbs test suite (Debian's python3-pyverbs installs it in
# /usr/share/doc/rdma-core/tests) module by module, printing one machine-readable line per
# test for xtask/src/capi_vm.rs:
#
#   UVERBS-PYTEST <ok|skip|fail|error|xfail|xpass> <test id> [reason]
#   UVERBS-PYMODULE <module> <import-error|done> [reason]
#
# rdma-core's own run_tests.py imports every module before the first test runs, so one
# import error ends the whole run; here an import error is reported for its module and the
# next module runs.
#
# rdma-core's code is not modified. One method of its base class is replaced at run time:
# RDMATestCase._get_ip_mac looks for the device's netdev under
# /sys/class/infiniband/<dev>/device/net/, which an rxe device (no parent device) lacks, so
# every RDMA-CM test skipped ("doesn't have net interface"). The replacement finds the netdev
# through the GID's own attribute, /sys/class/infiniband/<dev>/ports/<port>/gid_attrs/ndevs/<idx>,
# and otherwise does what the original does.
#
# usage: python3 pyverbs_runner.py [--dev DEV] [module ...]   (default: every test_*.py)

import importlib
import os
import sys
import traceback
import types
import unittest

TESTS = '/usr/share/doc/rdma-core/tests'


def out(line):
    sys.stdout.write(line.replace('\n', ' ') + '\n')
    sys.stdout.flush()


class Result(unittest.TextTestResult):
    """TextTestResult that also prints one UVERBS-PYTEST line per outcome."""

    def _mark(self, kind, test, reason=''):
        out('UVERBS-PYTEST %s %s %s' % (kind, test.id(), reason))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._mark('ok', test)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._mark('skip', test, reason)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._mark('fail', test, str(err[1]).splitlines()[0][:200] if str(err[1]) else err[0].__name__)

    def addError(self, test, err):
        super().addError(test, err)
        self._mark('error', test, '%s: %s' % (err[0].__name__, str(err[1])[:200]))

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            kind = 'fail' if issubclass(err[0], test.failureException) else 'error'
            self._mark(kind, subtest, '%s: %s' % (err[0].__name__, str(err[1])[:200]))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._mark('xfail', test)

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._mark('xpass', test)


def netdev_of_gid(dev, port, idx):
    try:
        with open('/sys/class/infiniband/%s/ports/%d/gid_attrs/ndevs/%d' % (dev, port, idx)) as f:
            return f.read().strip()
    except OSError:
        return None


def patch_base(base):
    def _get_ip_mac(self, dev, port, idx):
        net_name = netdev_of_gid(dev, port, idx)
        if net_name is None:
            self.args.append([dev, port, idx, None, None])
            return
        try:
            ip_addr, mac_addr = self.get_ip_mac_address(net_name)
        except (KeyError, IndexError):
            self.args.append([dev, port, idx, None, None])
        else:
            self.args.append([dev, port, idx, ip_addr, mac_addr])

    base.RDMATestCase._get_ip_mac = _get_ip_mac


def main():
    sys.path[:0] = [TESTS, os.path.dirname(TESTS)]
    from args_parser import parser
    parser.parse_args()  # --dev etc.; leaves the rest in sys.argv
    # The package `tests` without its __init__.py (which imports every module at once).
    pkg = types.ModuleType('tests')
    pkg.__path__ = [TESTS]
    sys.modules['tests'] = pkg
    wanted = sys.argv[1:]
    if not wanted:
        wanted = sorted(f[:-3] for f in os.listdir(TESTS)
                        if f.startswith('test_') and f.endswith('.py'))
    try:
        patch_base(importlib.import_module('tests.base'))
    except BaseException:
        # Every test module imports tests.base: each reports the import error on its own.
        out('UVERBS-PYMODULE tests.base import-error %s' % traceback.format_exc().splitlines()[-1])
    # tests.utils first, as the alphabetical run imports it (through test_addr): imported
    # first by an EFA module, tests.efa_base and tests.utils import each other half-done.
    try:
        importlib.import_module('tests.utils')
    except BaseException:
        out('UVERBS-PYMODULE tests.utils import-error %s' % traceback.format_exc().splitlines()[-1])
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=2, resultclass=Result)
    for name in wanted:
        mod = 'tests.' + name
        try:
            m = importlib.import_module(mod)
        except BaseException:
            out('UVERBS-PYMODULE %s import-error %s' % (mod, traceback.format_exc().splitlines()[-1]))
            continue
        suite = unittest.defaultTestLoader.loadTestsFromModule(m)
        runner.run(suite)
        out('UVERBS-PYMODULE %s done' % mod)
    return 0


if __name__ == '__main__':
    sys.exit(main())
