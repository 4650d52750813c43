"""The NumPy reference: Featherstone's algorithms, dense 6×6 algebra, no sparsity tricks.

This is the oracle every generated kernel is checked against, so it is written to be read:
one body at a time, the equations of *Rigid Body Dynamics Algorithms* (Featherstone, 2008) and,
for the derivatives, the chain rule applied to RNEA (as in Carpentier & Mansard, RSS 2018) and
∂q̈/∂u = −M⁻¹ ∂τ/∂u (their Eq. for forward dynamics).

Every function takes one state ``(nq,)`` or a batch ``(N, nq)``; outputs follow the input.

External forces ``f_ext`` are ``(nb, 6)`` (or ``(N, nb, 6)``) spatial forces
``[force; torque]`` acting on each body, expressed in the body frame (Pinocchio's convention).

``dynamics`` holds RNEA, CRBA, ABA, M⁻¹, the derivatives and forward kinematics (and the
helpers the other modules build on), ``scan`` the same dynamics as prefix scans, ``contact``
frames, Λ⁻¹ and contact dynamics, ``stale`` inverse dynamics with one period old data
(spatial schemes, and Hamilton, Walker & Bennett's Table 1 in Luh–Walker–Paul 3-vectors).

Products are written ``@`` except in the kinematics, RNEA and CRBA (and the coupled contractions
on them), which use :func:`rbdgen.spatial.mm`, a fixed-order product: their numbers reach
generated files (the HLS testbench's stale-data states, ``generate --snap``'s report in the
manifest), and BLAS's ``@`` rounds differently on AVX2, AVX-512 and SSE machines. Everything
else is compared with a tolerance, where the faster BLAS products are as good.
"""
from __future__ import annotations

from .contact import (REFERENCES, Contact, ContactError, Loop, contact_fd, frame_bias_acceleration, frame_jacobian,
                      frame_placement, frame_velocity, osim_inverse)
from .dynamics import (aba, aba_derivatives, crba, crba_diagonal, forward_kinematics, gravity, minv, nle, rnea,
                       rnea_derivatives)
from .scan import aba_scan, rnea_scan
from .stale import STALE_SCHEMES, LWPState, StaleState, rnea_stale

__all__ = ["rnea", "nle", "gravity", "crba", "crba_diagonal", "aba", "minv", "rnea_derivatives", "aba_derivatives",
           "forward_kinematics",
           # the same dynamics as parallel prefix scans (issue 12; rbdgen/reference/scan.py)
           "rnea_scan", "aba_scan",
           # frames, Λ⁻¹ and contact dynamics (issue 13; rbdgen/reference/contact.py)
           "frame_placement", "frame_jacobian", "frame_velocity", "frame_bias_acceleration", "osim_inverse",
           "contact_fd", "Contact", "Loop", "ContactError", "REFERENCES",
           # inverse dynamics with one period old neighbour data (issue 14; rbdgen/reference/stale.py)
           "rnea_stale", "StaleState", "LWPState", "STALE_SCHEMES"]
