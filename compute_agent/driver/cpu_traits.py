"""An x86 CPU's feature flags (as /proc/cpuinfo spells them) as os-traits' HW_CPU_X86_* traits.

Most flags are the trait's own name in lower case (avx2: HW_CPU_X86_AVX2); the
table holds those Linux spells otherwise. A flag os-traits has no name for gives
no trait. Other architectures give none: their flags mean something else.
"""

import os_traits

PREFIX = "HW_CPU_X86_"
X86_ARCHES = frozenset({"x86_64", "amd64", "i386", "i486", "i586", "i686", "x86"})
_KNOWN = frozenset(os_traits.get_traits(PREFIX))
#: Linux flag -> the os-traits name after HW_CPU_X86_, where the two differ.
RENAMED = {
    "pni": "SSE3",
    "sse4_1": "SSE41",
    "sse4_2": "SSE42",
    "aes": "AESNI",
    "pclmulqdq": "CLMUL",
    "fma": "FMA3",
    "bmi1": "BMI",
    "sha_ni": "SHA",
    "rtm": "TSX",
    "avx512_vnni": "AVX512VNNI",
    "avx512_vbmi2": "AVX512VBMI2",
    "avx512_bitalg": "AVX512BITALG",
    "avx512_vpopcntdq": "AVX512VPOPCNTDQ",
    "vaes": "AVX512VAES",
    "gfni": "AVX512GFNI",
    "vpclmulqdq": "AVX512VPCLMULQDQ",
    "amx_bf16": "AMXBF16",
    "amx_int8": "AMXINT8",
    "amx_tile": "AMXTILE",
    "md_clear": "INTEL_MD_CLEAR",
}


def of_flags(arch, flags):
    """The sorted traits of ``flags`` on a CPU of architecture ``arch`` (none unless x86)."""
    if (arch or "").lower() not in X86_ARCHES:
        return []
    found = {PREFIX + RENAMED.get(flag.lower(), flag.upper()) for flag in flags}
    return sorted(found & _KNOWN)
