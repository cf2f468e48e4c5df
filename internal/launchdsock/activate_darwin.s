//go:build darwin

#include "textflag.h"

// Trampolines into libSystem, called through syscall.syscall (see activate_darwin.go).

TEXT libc_launch_activate_socket_trampoline<>(SB),NOSPLIT,$0-0
	JMP	libc_launch_activate_socket(SB)
GLOBL	·launchActivateSocketAddr(SB), RODATA, $8
DATA	·launchActivateSocketAddr(SB)/8, $libc_launch_activate_socket_trampoline<>(SB)

TEXT libc_free_trampoline<>(SB),NOSPLIT,$0-0
	JMP	libc_free(SB)
GLOBL	·freeAddr(SB), RODATA, $8
DATA	·freeAddr(SB)/8, $libc_free_trampoline<>(SB)
