#!/usr/bin/python3
"""Runs rdma-core's pyverbs test suite (its tests/ directory, the version
of the installed python3-pyverbs) and prints one line per test and a JSON
summary, for tests/pyverbs_suite.rs and for the README's counts.

    pyverbs_suite.py RDMA_CORE_TESTS_DIR [unittest arguments...]

Each line: `RESULT<TAB>module.Class.test<TAB>reason` (RESULT: pass, skip,
fail, error; the reason is the skip's message or the exception's last
line). The last line: `SUMMARY <json>` with the counts by module and
outcome, and the skips of the generic (non-vendor) modules by reason.
Vendor modules are test_mlx5_* and test_efa* (they need that hardware or
its direct verbs). Runs the suite as its run_tests.py does (the `tests`
package loading every test_*.py).
"""
import collections
import json
import os
import sys
import unittest


def is_vendor(module):
    return module.startswith(('test_mlx5', 'test_efa'))


class Recorder(unittest.TextTestResult):
    """Keeps every test's outcome beside the usual verbose output."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.outcomes = []

    def _note(self, test, result, reason):
        reason = ' '.join(str(reason).split())
        self.outcomes.append((result, test.id(), reason))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._note(test, 'pass', '')

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._note(test, 'skip', reason)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._note(test, 'fail', self._last_line(err))

    def addError(self, test, err):
        super().addError(test, err)
        self._note(test, 'error', self._last_line(err))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._note(test, 'pass', 'expected failure')

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._note(test, 'fail', 'unexpected success')

    @staticmethod
    def _last_line(err):
        return ''.join(str(err[1]).splitlines()[-1:]) or err[0].__name__


def main():
    if len(sys.argv) < 2 or not os.path.isfile(os.path.join(sys.argv[1], 'run_tests.py')):
        sys.exit('usage: pyverbs_suite.py RDMA_CORE_TESTS_DIR [unittest args]')
    tests_dir = os.path.abspath(sys.argv[1])
    # As run_tests.py: the directory itself on the path (args_parser), and
    # the package `tests` loaded from it.
    sys.path.insert(0, tests_dir)
    from importlib.machinery import SourceFileLoader
    from args_parser import parser
    sys.argv = [os.path.join(tests_dir, 'run_tests.py')] + sys.argv[2:]
    parser.parse_args()
    pkg = SourceFileLoader('tests', os.path.join(tests_dir, '__init__.py')).load_module()
    loader = unittest.TestLoader()
    names = [a for a in sys.argv[1:] if not a.startswith('-')]
    suite = loader.loadTestsFromNames(names, pkg) if names else loader.loadTestsFromModule(pkg)
    runner = unittest.TextTestRunner(verbosity=2, resultclass=Recorder, stream=sys.stderr)
    result = runner.run(suite)

    by_module = collections.defaultdict(collections.Counter)
    skips = collections.Counter()
    for res, tid, reason in result.outcomes:
        print(f'{res}\t{tid}\t{reason}')
        module = tid.split('.')[1] if tid.startswith('tests.') else tid.split('.')[0]
        by_module[module][res] += 1
        if res == 'skip' and not is_vendor(module):
            skips[reason] += 1
    total = collections.Counter()
    for c in by_module.values():
        total.update(c)
    summary = {
        'total': dict(total),
        'modules': {m: dict(c) for m, c in sorted(by_module.items())},
        'generic_skips': dict(skips.most_common()),
    }
    print('SUMMARY ' + json.dumps(summary, sort_keys=True))
    sys.stdout.flush()
    # The shim's reports are written at exit: leave normally.
    return 0


if __name__ == '__main__':
    sys.exit(main())
