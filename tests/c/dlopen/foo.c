/* libfoo.so for the RUNPATH test: found only through its user's RUNPATH. */
int foo_answer(void);

int foo_answer(void)
{
	return 42;
}
